"""Red-team attempts beyond the exploit kit (exploits.py), each with real bwrap sandboxes and real
processes: the attempt must not pass a check, must not end the episode unscored (an exception
from ``step`` or a checker is a reward the policy zeroes at will), and must stay bounded."""

from __future__ import annotations

import os

import pytest

from agentsynth_kernel import ToolCall
from agentsynth_python import PythonEnvironment
from agentsynth_python.checkers import PythonFile, PythonStdout, PythonValue
from conftest import needs_bwrap

pytestmark = needs_bwrap


def run(env: PythonEnvironment, code: str):
    return env.step(ToolCall("python_exec", {"code": code}))


def shell(env: PythonEnvironment, command: str):
    return env.step(ToolCall("shell", {"command": command}))


@pytest.fixture
def make_env(tmp_path):
    made: list[PythonEnvironment] = []

    def make(**params) -> PythonEnvironment:
        env = PythonEnvironment(base_dir=tmp_path, isolation="bwrap", check_seconds=10, **params)
        env.reset(0)
        made.append(env)
        return env

    yield make
    for env in made:
        env.close()


# --- the host parses the agent's bytes: a failed check, never an exception ----------------------


def test_deeply_nested_json_and_oversized_csv_fields_fail_the_file_check(make_env):
    env = make_env()
    run(env, "for depth in (900, 990, 5000, 100000):\n"
             "    open(f'deep{depth}.json', 'w').write('[' * depth + ']' * depth)\n"
             "open('deep_obj.json', 'w').write('{\"a\": ' * 3000 + '1' + '}' * 3000)\n"
             "open('wide.csv', 'w').write('id,name\\n1,' + 'x' * 300000 + '\\n')\n"
             "open('nul.csv', 'w').write('id,name\\n1,a\\x00b\\n')")
    checks = [PythonFile(file=f"deep{d}.json", json_path="$", equals=[1]) for d in (900, 990, 5000, 100000)]
    checks += [PythonFile(file="deep_obj.json", json_path="$.a", equals=1),
               PythonFile(file="deep_obj.json", json_path="$", contains="a"),
               PythonFile(file="wide.csv", csv={"row": 0, "column": "name"}, equals="x"),
               PythonFile(file="wide.csv", rows=1),
               PythonFile(file="nul.csv", csv={"where": {"id": "1"}, "column": "name"}, equals="ab")]
    for check in checks:
        verdict = check.check(env, None)  # raised before: RecursionError, csv.Error
        assert not verdict.passed, (check.file, verdict.detail)
        assert check.file in verdict.detail


def test_a_deep_value_fails_the_value_check_on_the_host(make_env):
    env = make_env()
    run(env, "open('deep.json', 'w').write('[' * 980 + ']' * 980)")
    verdict = PythonValue(expr="read_json('deep.json')", equals=[1]).check(env, None)
    assert not verdict.passed and verdict.detail


FORGER = """
import os, sys
frame = sys._getframe()
while frame is not None and "nonce" not in frame.f_locals:
    frame = frame.f_back
nonce, fd = frame.f_locals["nonce"], frame.f_locals["result_fd"]
os.write(fd, (nonce + " " + {doc!r} + "\\n").encode())
os._exit(0)
"""


@pytest.mark.parametrize("doc", ['[1]', '"x"', '{"value": 1, "error": null}', '[' * 5000 + ']' * 5000, "{}"])
def test_a_forged_result_of_the_wrong_shape_fails_the_check(make_env, doc):
    # world_on_path runs the agent's module in the checker, where it can find the nonce: what it
    # forges must not crash the host's reading of the result (it raised TypeError / RecursionError)
    env = make_env()
    run(env, f"open('mod.py', 'w').write({FORGER.format(doc=doc)!r})")
    verdict = PythonValue(expr="mod.x", setup="import mod", world_on_path=True, equals=1).check(env, None)
    assert not verdict.passed and "result" in verdict.detail, verdict.detail


# --- the agent's code runs in the runner: what it writes on the reply channel ---------------------

REPLY = """
import os, sys
frame = sys._getframe()
while frame is not None and "responses" not in frame.f_locals:
    frame = frame.f_back
os.write(frame.f_locals["responses"], {line!r})
"""


@pytest.mark.parametrize("line", [
    b'{"stdout": 5, "stdout_bytes": "x"}\n',
    b'{"stdout": "", "stdout_bytes": 1e400, "stderr": "", "stderr_bytes": 0, "value": null, "error": "", "status": null}\n',
    b'[' * 100000 + b']' * 100000 + b'\n',
    b'"just a string"\n',
])
def test_a_forged_reply_on_the_control_channel_is_an_error_observation(make_env, line):
    env = make_env()
    obs = run(env, REPLY.format(line=line))  # raised before: TypeError / OverflowError / RecursionError
    assert obs.error and "garbage to its control channel" in obs.content, obs.content
    after = run(env, "1 + 1")
    assert "fresh Python process" in after.content and after.content.endswith("2")


def test_a_stdout_checker_compares_whatever_the_command_prints(make_env):
    env = make_env()
    run(env, "open('out.txt', 'wb').write(b'\\xff\\xfe' + b'[' * 100000)")
    verdict = PythonStdout(command="cat out.txt", equals="ok").check(env, None)
    assert not verdict.passed
    assert os.path.exists(env.world / "out.txt")

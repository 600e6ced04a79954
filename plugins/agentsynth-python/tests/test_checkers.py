"""Checkers read the real end state and cannot be redirected: links, FIFOs, planted modules,
forged output and a live daemon all fail; bad parameters are errors at load."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentsynth_kernel import ToolCall
from agentsynth_python import PythonEnvironment
from agentsynth_python.checkers import PythonFile, PythonStdout, PythonValue
from agentsynth_python.sandbox import chown_tree, processes_in
from conftest import BACKENDS


def run(env, code):
    obs = env.step(ToolCall("python_exec", {"code": code}))
    assert not obs.error, obs.content
    return obs


@pytest.fixture(params=BACKENDS)
def env(tmp_path, request):
    """Every checker test runs on both backends (bwrap, a Podman / Docker container)."""
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "data.json").write_text('{"a": {"b": [1, 2.5]}}')
    e = PythonEnvironment(base_dir=tmp_path, files="seed", check_seconds=5, isolation=request.param)
    e.reset(0)
    yield e
    e.close()


def test_file_checks_on_text_json_and_csv(env):
    run(env, "open('out.txt', 'w').write('  hello world \\n')\n"
             "open('t.csv', 'w').write('id,name\\n1,ann\\n2,bob\\n')")
    assert PythonFile(file="out.txt", equals="hello world").check(env, None).passed
    assert PythonFile(file="out.txt", contains=["hello", "world"]).check(env, None).passed
    assert not PythonFile(file="out.txt", equals="hello").check(env, None).passed
    assert PythonFile(file="data.json", json_path="$.a.b[1]", equals=2.5).check(env, None).passed
    missing = PythonFile(file="data.json", json_path="$.a.c", equals=1).check(env, None)
    assert not missing.passed and "no key 'c'" in missing.detail
    assert PythonFile(file="t.csv", csv={"where": {"id": "2"}, "column": "name"}, equals="bob").check(env, None).passed
    assert PythonFile(file="t.csv", csv={"row": 0, "column": "name"}, equals="ann", rows=2).check(env, None).passed
    assert not PythonFile(file="t.csv", rows=3).check(env, None).passed
    assert PythonFile(file="nope.txt", exists=False).check(env, None).passed
    assert not PythonFile(file="nope.txt").check(env, None).passed


def test_file_checks_never_follow_links_or_open_fifos(env, tmp_path):
    bait = tmp_path / "bait.txt"
    bait.write_text("expected")
    (tmp_path / "baitdir").mkdir()
    (tmp_path / "baitdir" / "f.txt").write_text("expected")
    run(env, f"import os\nos.symlink({str(bait)!r}, 'link.txt')\nos.symlink({str(tmp_path / 'baitdir')!r}, 'dir')\n"
             "os.mkfifo('fifo.txt')")
    for name in ("link.txt", "dir/f.txt", "fifo.txt"):
        verdict = PythonFile(file=name, equals="expected").check(env, None)
        assert not verdict.passed and ("symlink" in verdict.detail or "not a regular file" in verdict.detail
                                       or "not a plain directory" in verdict.detail), verdict.detail
    os.link(bait, env.world / "hard.txt")  # the sandbox cannot make one (EXDEV); the host check refuses it anyway
    assert "hard links" in PythonFile(file="hard.txt", equals="expected").check(env, None).detail


def test_value_checks_run_in_a_fresh_isolated_process(env):
    run(env, "import json, os\njson.dump({'total': 41.999}, open('out.json', 'w'))\n"
             "fake = 'def load(*a, **k):\\n    return {\"total\": 1}\\nloads = load\\n'\n"
             "for name in ('json.py', 'sitecustomize.py', 'usercustomize.py'):\n    open(name, 'w').write(fake)\n"
             "os.makedirs('.local/lib/python3.11/site-packages', exist_ok=True)\n"
             "open('.local/lib/python3.11/site-packages/usercustomize.py', 'w').write('import builtins; builtins.len = 0')\n"
             "open('x.pth', 'w').write('import sitecustomize')\n"
             "import builtins\nbuiltins.open = None  # the agent's own interpreter is patched, not the checker's")
    verdict = PythonValue(expr="read_json('out.json')['total']", equals=42, tolerance=0.01).check(env, None)
    assert verdict.passed, verdict.detail
    assert PythonValue(expr="len([1, 2])", equals=2).check(env, None).passed
    writes = PythonValue(expr="open('new.txt', 'w').write('x')", equals=1).check(env, None)
    assert not writes.passed and "Read-only file system" in writes.detail
    assert not (env.world / "new.txt").exists()


def test_a_forged_result_on_the_checker_channel_fails(env):
    run(env, "open('mod.py', 'w').write('''import os\\nfor fd in range(256):\\n    try:\\n"
             "        os.write(fd, b'{\"value\": 42}\\\\n')\\n    except OSError:\\n        pass\\nos._exit(0)\\n''')")
    verdict = PythonValue(expr="mod.x", setup="import mod", world_on_path=True, equals=42).check(env, None)
    assert not verdict.passed and "result channel" in verdict.detail


def test_a_daemon_is_dead_before_any_check_reads_the_world(env):
    run(env, "import os, time\nif os.fork() == 0:\n    os.setsid()\n    while True:\n"
             "        open('out.txt', 'w').write('late')\n        time.sleep(0.01)\nopen('out.txt', 'w').write('on time')")
    namespace = env.proc.namespace
    assert processes_in({namespace})  # the daemon is running
    # freezing kills the whole sandbox first, so what the checks read cannot change under them
    env.world_for_checks()
    assert processes_in({namespace}) == []
    assert "episode is over" in env.step(ToolCall("python_exec", {"code": "1"})).content


def test_checks_are_bounded_by_check_seconds(env):
    verdict = PythonValue(expr="[0 for _ in iter(int, 1)]", equals=1).check(env, None)
    assert not verdict.passed and ("check_seconds" in verdict.detail or "MemoryError" in verdict.detail)
    hang = PythonStdout(command="sleep 100").check(env, None)
    assert not hang.passed and "timeout" in hang.detail


def test_stdout_checks_with_hidden_files(env, tmp_path):
    (tmp_path / "hidden.py").write_text("import json\nprint(json.load(open('/world/data.json'))['a']['b'][0] + 1)\n")
    check = PythonStdout(command="python3 -I /check/hidden.py", files=["hidden.py"], equals="2", base_dir=tmp_path)
    assert check.check(env, None).passed
    failing = PythonStdout(command=["/bin/sh", "-c", "echo hi; exit 4"], contains="hi").check(env, None)
    assert not failing.passed and "exit status 4" in failing.detail
    assert PythonStdout(command="echo hi; exit 4", returncode=4, equals="hi").check(env, None).passed
    listing = PythonStdout(command="ls /check /work /root 2>&1; true", contains="No such file").check(env, None)
    assert listing.passed


def test_bad_parameters_are_errors_at_load(tmp_path):
    with pytest.raises(ValueError, match="relative"):
        PythonFile(file="/etc/passwd")
    with pytest.raises(ValueError, match="no '..'"):
        PythonFile(file="../x")
    with pytest.raises(ValueError, match="exactly one of 'row'"):
        PythonFile(file="a.csv", csv={"column": "x"})
    with pytest.raises(ValueError, match="json_path"):
        PythonFile(file="a.json", json_path="$..a")
    with pytest.raises(ValueError, match="invalid syntax|expr"):
        PythonValue(expr="1 +", equals=1)
    with pytest.raises(ValueError, match="needs 'equals'"):
        PythonValue(expr="1")
    with pytest.raises(ValueError, match="not a file of the pack"):
        PythonStdout(command="true", files=["missing.py"], base_dir=tmp_path)
    with pytest.raises(ValueError, match="command"):
        PythonStdout(command="")


def test_checkers_refuse_other_environments():
    with pytest.raises(TypeError, match="needs the 'python' environment"):
        PythonFile(file="a").check(object(), None)


def test_pack_files_are_seeded_and_private_per_episode(env, tmp_path):
    run(env, "open('data.json', 'w').write('changed')")
    other = PythonEnvironment(base_dir=tmp_path, files="seed", isolation=env.spec.isolation)
    try:
        first = other.reset(0)
        assert "data.json (22 bytes)" in first.content
        assert (other.world / "data.json").read_text() == '{"a": {"b": [1, 2.5]}}'
    finally:
        other.close()
    assert Path(tmp_path / "seed" / "data.json").read_text() == '{"a": {"b": [1, 2.5]}}'


def test_world_imports_ignore_planted_bytecode(env):
    import py_compile

    world = env.world
    (world / "mod.py").write_text("x = 2\n")  # the bytecode the agent wants the checker to run
    py_compile.compile(str(world / "mod.py"), cfile=str(world / "__pycache__" / "mod.cpython-311.pyc"))
    stat = (world / "mod.py").stat()
    (world / "mod.py").write_text("x = 1\n")  # the source anyone reads: same size, same mtime
    os.utime(world / "mod.py", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    chown_tree(world, env.uid)  # as if the agent had written them
    assert "2" in env.step(ToolCall("python_exec", {"code": "import mod\nmod.x"})).content  # a plain import runs it
    verdict = PythonValue(expr="mod.x", setup="import mod", world_on_path=True, equals=1).check(env, None)
    assert verdict.passed, verdict.detail

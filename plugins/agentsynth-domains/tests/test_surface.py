"""The plugin's surface: registrations, `init-domain` (a scaffolded domain runs the loop as is),
and bad input (path-qualified errors, exit 2, no traceback)."""

import json
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

from agentsynth_kernel import get_host
from agentsynth_kernel.cli import cli
from conftest import Roles, read_jsonl, spec_text


def test_registrations():
    host = get_host()
    assert host.get("domain", "math").plugin == "domains"
    assert host.get("domain", "docs_qa").plugin == "domains"
    assert host.get("generator", "autosynth").plugin == "domains"


def test_init_domain_scaffolds_a_domain_that_runs_as_is(server, run_spec, tmp_path):
    result = CliRunner().invoke(cli, ["init-domain", "capitals", "-o", str(tmp_path / "capitals.py")])
    assert result.exit_code == 0, result.output
    again = CliRunner().invoke(cli, ["init-domain", "capitals", "-o", str(tmp_path / "capitals.py")])
    assert again.exit_code != 0 and "exists" in again.output
    bad = CliRunner().invoke(cli, ["init-domain", "9lives", "-o", str(tmp_path / "x.py")])
    assert bad.exit_code == 2 and "NAME" in bad.output

    def challenger(prompt, n):
        capital = re.search(r"capital of \w+ \((\w+)\)", prompt).group(1)
        return json.dumps({"question": f"Riddle #{capital[::-1]}: which city am I?", "answer": capital})

    def strong(prompt, n):
        word = re.search(r"#(\w+)", prompt).group(1)
        return f"answer: {word[::-1]}"

    server.handler = Roles(challenger=challenger, weak=lambda p, n: "answer: London", strong=strong)
    code, report, out = run_spec(spec_text(server, "capitals.py"))
    assert code == 0, out
    assert report["accepted"] == 3 and report["acceptance"] == "verifiable"
    assert {r["messages"][1]["content"] for r in read_jsonl(report["output"])} == {
        "answer: Paris", "answer: Nairobi", "answer: Lima"}


def agentsynth(*args, cwd):
    return subprocess.run([sys.executable, "-m", "agentsynth_kernel", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=60)


@pytest.mark.parametrize("generate, message", [
    ({"domain": "maths", "challenger": "a", "weak": "b", "strong": "c"},
     "generate.domain: unknown domain 'maths' (did you mean 'math'?)"),
    ({"domain": "math", "weak": "b", "strong": "c"}, "generate.challenger: missing required key"),
    ({"domain": "math", "challenger": "a", "weak": {"modle": "x"}, "strong": "c"}, "generate.weak.modle: unknown key"),
    ({"domain": "math", "challenger": "a", "weak": "b", "strong": "c", "attempts": 0},
     "generate.attempts: expected an integer >= 1"),
    ({"domain": "math", "challenger": "a", "weak": "b", "strong": "c", "acceptance": "vibes"},
     "generate.acceptance: expected one of rubric, verifiable, judge"),
    ({"domain": "math", "challenger": "a", "weak": "b", "strong": "c", "pii": "maybe"}, "generate.pii: expected one of"),
    ({"domain": "math", "challenger": "a", "weak": "b", "strong": "c", "max_round": 2},
     "generate.max_round: unknown key (did you mean 'max_rounds'?)"),
    ({"domain": {"type": "docs_qa", "path": "nowhere"}, "challenger": "a", "weak": "b", "strong": "c"},
     "generate.domain: domain docs_qa: path:"),
    ({"domain": {"type": "math", "colour": 1}, "challenger": "a", "weak": "b", "strong": "c"},
     "generate.domain: math: bad parameters"),
    ({"domain": "missing.py", "challenger": "a", "weak": "b", "strong": "c"}, "missing.py: no such file"),
    ({"domain": "math", "challenger": "a", "weak": "b", "strong": "c", "harness": {"rules": {"solverr": ["x"]}}},
     "generate.harness.rules.solverr: unknown role (did you mean 'solver'?)"),
])
def test_bad_input_is_a_clear_error(tmp_path, generate, message):
    (tmp_path / "spec.yaml").write_text(json.dumps({"generate": {"type": "autosynth", **generate}}), encoding="utf-8")
    result = agentsynth("run", "spec.yaml", "--run-dir", "run", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "spec.yaml: generate." in result.stderr and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_verify_none_falls_back_to_the_judge(server, run_spec, tmp_path):
    CliRunner().invoke(cli, ["init-domain", "capitals", "-o", str(tmp_path / "capitals.py")])

    def challenger(prompt, n):
        capital = re.search(r"capital of \w+ \((\w+)\)", prompt).group(1)
        return json.dumps({"question": f"Riddle about {capital}?", "answer": capital})

    def judge(prompt, n):
        # the scaffold's judge prompt: "Reference answer: X\nResponse: Y"
        ref = re.search(r"Reference answer: (\w+)", prompt).group(1)
        return json.dumps({"score": 1.0 if f"It is {ref}" in prompt else 0.0})

    def strong(prompt, n):
        return "It is " + prompt.split()[2].rstrip("?")  # "Riddle about Paris?" -> "It is Paris"

    roles = Roles(challenger=challenger, weak=lambda p, n: "No idea", strong=strong, judge=judge)
    server.handler = roles
    code, report, out = run_spec(spec_text(server, "capitals.py", attempts=2))
    assert code == 0, out
    assert report["accepted"] == 3
    # no "answer:" line anywhere: verify said None, so every attempt went to the judge
    assert len(roles.calls("judge")) == 3 * 4

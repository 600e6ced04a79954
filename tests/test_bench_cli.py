"""``agentsynth bench`` on the kv testworld: rates, pass^k, Wilson intervals, tiers, --compare, the CI gate."""

from __future__ import annotations

import json
import math

import pytest

from agentsynth_kernel.commands.bench import bench_stats, parse_policy
from agentsynth_kernel.errors import SpecError
from agentsynth_kernel.stats import pass_hat_k, wilson_interval

PACK = """
id: kvbench
environment: {type: kv, initial: {a: "0"}}
tasks:
  - id: set-a
    tier: easy
    split: train
    instruction: Set a to 1
    checkers: [{type: kv_equals, key: a, value: "1"}]
  - id: set-b
    tier: easy
    split: test
    instruction: Set b to 2
    checkers: [{type: kv_equals, key: b, value: "2"}]
  - id: set-c
    tier: hard
    split: test
    instruction: Set c to 3
    checkers: [{type: kv_equals, key: c, value: "3"}]
"""

ORACLE = """
ORACLE = {
    "set-a": [{"tool": "set", "arguments": {"key": "a", "value": "1"}}, {"answer": "done"}],
    "set-b": [{"tool": "set", "arguments": {"key": "b", "value": "2"}}, {"answer": "done"}],
    "set-c": [{"tool": "set", "arguments": {"key": "c", "value": "3"}}, {"answer": "done"}],
}
"""

# Solves a task only on some seeds: a deterministic "flaky agent".
FLAKY = """
from agentsynth_kernel import Answer, ToolCall

WANT = {"set-a": ("a", "1"), "set-b": ("b", "2"), "set-c": ("c", "3")}

def act(state):
    if state.trajectory.steps:
        return Answer("done")
    key, value = WANT[state.task.id]
    return ToolCall("set", {"key": key, "value": value if state.seed % 3 else "wrong"})
"""


@pytest.fixture
def kvpack(write):
    write("kvbench/oracle.py", ORACLE)
    write("flaky.py", FLAKY)
    return write("kvbench/pack.yaml", PACK).parent


def test_oracle_bench_json_and_tables(cli, kvpack):
    code, out, err = cli("bench", "--pack", "kvbench", "--policy", "oracle", "--json", "r.json", "--seed", "3")
    assert code == 0, err
    data = json.loads((kvpack.parent / "r.json").read_text())
    assert data["seed"] == 3 and data["pack"]["id"] == "kvbench"
    assert data["bench"]["overall"]["pass_at_1"] == 1.0
    assert data["bench"]["overall"]["pass_at_1_ci95"] == [round(x, 4) for x in wilson_interval(3, 3)]
    assert set(data["bench"]["tiers"]) == {"easy", "hard"}
    assert data["bench"]["tiers"]["easy"]["tasks"] == 2
    assert "per tier" in out and "easy" in out and "hard" in out


def test_pass_hat_k_is_the_unbiased_estimator_with_wilson_ci(cli, kvpack):
    code, out, err = cli("bench", "--pack", "kvbench", "--policy", "callable,function=flaky.py:act", "-k", "4",
                         "--json", "r.json")
    assert code == 0, err
    data = json.loads((kvpack.parent / "r.json").read_text())
    rows = {r["task_id"]: r for r in data["tasks"]}
    per_task = []
    for row in rows.values():
        n, c = row["trials"], row["passed"]
        assert n == 4
        assert row["pass_hat_4"] == pass_hat_k(n, c, 4) == (1.0 if c == 4 else 0.0)
        per_task.append(row["pass_hat_4"])
    passed = sum(r["passed"] for r in rows.values())
    assert 0 < passed < 12, "the flaky policy should pass some trials and fail others"
    overall = data["bench"]["overall"]
    assert overall["pass_at_1"] == round(passed / 12, 4)
    assert math.isclose(overall["pass_hat_k"], sum(per_task) / 3, abs_tol=1e-4)
    assert overall["pass_hat_k_ci95"] == [round(x, 4) for x in wilson_interval(sum(per_task), 3)]
    assert "pass^4" in out


def test_same_seed_same_result_other_seed_may_differ(cli, kvpack):
    results = []
    for seed in ("1", "1"):
        cli("bench", "--pack", "kvbench", "--policy", "callable,function=flaky.py:act", "-k", "3", "--seed", seed,
            "--json", "r.json")
        data = json.loads((kvpack.parent / "r.json").read_text())
        results.append([(r["task_id"], r["trial"], r["seed"], r["status"]) for r in data["results"]])
    assert results[0] == results[1]


def test_min_pass_rate_gate(cli, kvpack):
    code, out, _ = cli("bench", "--pack", "kvbench", "--policy", "noop", "--min-pass-rate", "80%")
    assert code == 1 and "gate FAIL: pass@1 0.0% vs minimum 80.0%" in out
    code, out, _ = cli("bench", "--pack", "kvbench", "--policy", "oracle", "--min-pass-rate", "0.8")
    assert code == 0 and "gate PASS" in out
    code, out, _ = cli("bench", "--pack", "kvbench", "--policy", "callable,function=flaky.py:act", "-k", "3",
                       "--min-pass-rate", "0.5", "--gate-metric", "pass^k", "--json", "r.json")
    data = json.loads((kvpack.parent / "r.json").read_text())
    gate = data["bench"]["gate"]
    assert gate["metric"] == "pass^k" and gate["value"] == data["bench"]["overall"]["pass_hat_k"]
    assert code == (0 if gate["value"] >= 0.5 else 1)


def test_min_pass_rate_rejects_nonsense(cli, kvpack):
    code, _, err = cli("bench", "--pack", "kvbench", "--policy", "oracle", "--min-pass-rate", "lots")
    assert code == 2 and "not a rate" in err
    code, _, err = cli("bench", "--pack", "kvbench", "--policy", "oracle", "--min-pass-rate", "150%")
    assert code == 2 and "not between 0 and 1" in err


def test_compare_is_paired_per_task(cli, kvpack):
    code, out, err = cli("bench", "--pack", "kvbench", "--compare", "noop", "oracle", "--json", "c.json",
                         "--min-pass-rate", "1")
    assert code == 0, err
    data = json.loads((kvpack.parent / "c.json").read_text())
    test = data["comparison"]["paired_test"]
    assert (test["wins_a"], test["wins_b"], test["ties"]) == (0, 3, 0)
    assert test["p_value"] == 0.25 and not test["significant_at_0.05"]  # 3 tasks cannot be significant
    assert [r["diff"] for r in data["comparison"]["tasks"]] == [1.0, 1.0, 1.0]
    assert data["gate"]["passed"] and data["b"]["bench"]["overall"]["pass_at_1"] == 1.0
    assert "B - A" in out and "paired sign test over 3 tasks" in out
    code, _, _ = cli("bench", "--pack", "kvbench", "--compare", "oracle", "noop", "--min-pass-rate", "1")
    assert code == 1  # the floor applies to B


def test_split_and_only(cli, kvpack):
    cli("bench", "--pack", "kvbench", "--policy", "oracle", "--split", "test", "--json", "r.json")
    data = json.loads((kvpack.parent / "r.json").read_text())
    assert sorted(r["task_id"] for r in data["tasks"]) == ["set-b", "set-c"]
    cli("bench", "--pack", "kvbench", "--policy", "oracle", "--only", "set-c", "--json", "r.json")
    assert [r["task_id"] for r in json.loads((kvpack.parent / "r.json").read_text())["tasks"]] == ["set-c"]


def test_json_to_stdout_is_pure_json(cli, kvpack):
    code, out, _ = cli("bench", "--pack", "kvbench", "--policy", "oracle", "--json", "-")
    assert code == 0 and json.loads(out)["counts"]["passed"] == 3


def test_run_dir_stores_and_resumes(cli, kvpack):
    code, _, _ = cli("bench", "--pack", "kvbench", "--policy", "oracle", "--run-dir", "rd", "--json", "1.json")
    assert code == 0 and (kvpack.parent / "rd").is_dir()
    code, _, _ = cli("bench", "--pack", "kvbench", "--policy", "oracle", "--run-dir", "rd", "--json", "2.json")
    first = json.loads((kvpack.parent / "1.json").read_text())
    second = json.loads((kvpack.parent / "2.json").read_text())
    assert code == 0 and first["run_id"] == second["run_id"] and second["episodes"] == 3


def test_bad_input_is_one_clean_line(cli, kvpack):
    code, _, err = cli("bench", "--pack", "kvbench", "--policy", "orcale")
    assert code == 2 and "policy.type: unknown policy 'orcale' (did you mean 'oracle'?)" in err
    code, _, err = cli("bench", "--pack", "nope", "--policy", "oracle")
    assert code == 2 and "no such pack" in err
    code, _, err = cli("bench", "--pack", "kvbench")
    assert code == 2 and "give --policy SPEC, or --compare A B" in err
    code, _, err = cli("bench", "--pack", "kvbench", "--policy", "noop,answer")
    assert code == 2 and "expected key=value" in err
    assert "Traceback" not in err


def test_parse_policy_forms(write, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert parse_policy("noop").to_dict() == {"type": "noop"}
    assert parse_policy("noop,answer=hi there").to_dict() == {"type": "noop", "answer": "hi there"}
    assert parse_policy("random,calls=5").params == {"calls": 5}
    assert parse_policy("{type: noop, answer: x}").to_dict() == {"type": "noop", "answer": "x"}
    write("p.yaml", "policy: {type: random, calls: 2}\n")
    assert parse_policy("p.yaml").to_dict() == {"type": "random", "calls": 2}
    write("agent.py", "def act(state):\n    return None\n")
    assert parse_policy("callable,function=agent.py:act").params["function"] == f"{tmp_path / 'agent.py'}:act"
    with pytest.raises(SpecError, match="invalid inline YAML"):
        parse_policy("{type: [")
    with pytest.raises(SpecError, match="missing required key 'type'"):
        parse_policy("{answer: x}")


def test_bench_stats_per_tier_blocks():
    summary = {"trials": 2, "tasks": [
        {"task_id": "a", "tier": "1", "trials": 2, "passed": 2, "pass_at_1": 1.0, "pass_hat_2": 1.0},
        {"task_id": "b", "tier": "1", "trials": 2, "passed": 1, "pass_at_1": 0.5, "pass_hat_2": 0.0},
        {"task_id": "c", "tier": "", "trials": 2, "passed": 0, "pass_at_1": 0.0, "pass_hat_2": 0.0},
    ]}
    stats = bench_stats(summary)
    assert stats["overall"]["pass_at_1"] == 0.5 and stats["overall"]["pass_hat_k"] == round(1 / 3, 4)
    assert stats["tiers"]["1"] == {
        "tasks": 2, "episodes": 4, "passed": 3, "pass_at_1": 0.75,
        "pass_at_1_ci95": [round(x, 4) for x in wilson_interval(3, 4)],
        "pass_hat_k": 0.5, "pass_hat_k_ci95": [round(x, 4) for x in wilson_interval(1.0, 2)],
    }
    assert stats["tiers"]["-"]["pass_at_1"] == 0.0


# --- the GitHub Action (action.yml at the repository root) -----------------------------------------


def _action():
    from pathlib import Path

    import yaml

    return yaml.safe_load((Path(__file__).parents[1] / "action.yml").read_text())


def test_action_is_a_composite_whose_env_uses_only_declared_inputs():
    import re

    action = _action()
    assert action["runs"]["using"] == "composite"
    declared = set(action["inputs"])
    used = set()
    for step in action["runs"]["steps"]:
        for value in (step.get("env") or {}).values():
            used |= set(re.findall(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}", str(value)))
        assert "${{ inputs." not in step.get("run", ""), "inputs reach scripts through env only (no injection)"
    assert used and used <= declared
    assert {"pass-rate", "pass-hat-k", "passed"} <= set(action["outputs"])


@pytest.mark.parametrize("policy,floor,status,passed", [("oracle", "0.8", 0, "true"), ("noop", "80%", 1, "false")])
def test_action_bench_step_gates_and_writes_outputs(kvpack, tmp_path, policy, floor, status, passed):
    import os
    import subprocess
    import sys
    from pathlib import Path

    action = _action()
    step = next(s for s in action["runs"]["steps"] if s.get("id") == "bench")
    defaults = {k: str(v.get("default", "")) for k, v in action["inputs"].items()}
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for key, value in step["env"].items():
        name = str(value).removeprefix("${{ inputs.").removesuffix(" }}")
        env[key] = defaults[name] if name in defaults else str(value)
    env.update(PACK=str(kvpack), POLICY=policy, MIN_PASS_RATE=floor, SPLIT="all", REPORT=str(tmp_path / "r.json"),
               GITHUB_OUTPUT=str(tmp_path / "out"), GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"))
    proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], env=env,
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == status, proc.stdout + proc.stderr
    outputs = dict(line.split("=", 1) for line in (tmp_path / "out").read_text().splitlines())
    assert outputs["passed"] == passed
    assert float(outputs["pass-rate"]) == (1.0 if policy == "oracle" else 0.0)
    summary = (tmp_path / "summary.md").read_text()
    assert "| **all** | 3 | 3 |" in summary and ("passed" if passed == "true" else "failed") in summary


def test_the_pass_hat_curve_and_flakiness_are_in_the_json_and_the_summary(cli, kvpack):
    code, out, err = cli("bench", "--pack", "kvbench", "--policy", "callable,function=flaky.py:act", "-k", "4",
                         "--json", "r.json")
    assert code == 0, err
    data = json.loads((kvpack.parent / "r.json").read_text())
    rows = data["tasks"]
    curve = data["bench"]["curve"]
    assert [p["k"] for p in curve] == [1, 2, 3, 4]
    for point in curve:
        expected = sum(pass_hat_k(r["trials"], r["passed"], point["k"]) for r in rows) / len(rows)
        assert point["pass_hat"] == round(expected, 4) and point["tasks"] == 3
    assert curve[0]["pass_hat"] == data["bench"]["overall"]["pass_at_1"]
    assert all(a["pass_hat"] >= b["pass_hat"] for a, b in zip(curve, curve[1:], strict=False))  # never rises
    flaky = data["bench"]["flakiness"]
    expected_flaky = [r["task_id"] for r in rows if 0 < r["passed"] < r["trials"]]
    assert flaky["flaky_tasks"] == expected_flaky and flaky["flaky"] == len(expected_flaky) >= 1
    assert flaky["flaky"] + flaky["always_pass"] + flaky["never_pass"] == 3
    assert "pass^1..k 1: " in out and f"flaky: {flaky['flaky']} task(s)" in out



def test_bench_exits_5_when_every_episode_errored(cli, write):
    write("agent.py", "def act(state):\n    raise RuntimeError('this policy cannot act')\n")
    write("kvb/pack.yaml", PACK)
    code, _, err = cli("bench", "--pack", "kvb", "--policy", "callable,function=agent.py:act")
    assert code == 5, err
    assert "every episode ended in an error, nothing was checked" in err and "this policy cannot act" in err


def test_the_curve_equals_the_binomial_estimator_and_stays_small_at_huge_trials():
    from agentsynth_kernel.commands.bench import curve_points, pass_hat_curve
    from agentsynth_kernel.stats import pass_hat_k

    tasks = [{"trials": 30, "passed": c} for c in (0, 7, 29, 30)]
    for point in pass_hat_curve(tasks, 30):
        exact = sum(pass_hat_k(30, t["passed"], point["k"]) for t in tasks) / len(tasks)
        assert point["pass_hat"] == pytest.approx(exact, abs=1e-4)
    # 45,455 trials (1M episodes of the core pack): log-spaced points, not 45,455 of them, and the
    # running product instead of binomials with thousands of digits
    big = pass_hat_curve([{"trials": 45_455, "passed": 45_000}, {"trials": 45_455, "passed": 45_455}], 45_455)
    assert [p["k"] for p in big][:10] == list(range(1, 11)) and big[-1]["k"] == 45_455 and len(big) < 100
    assert big[-1]["pass_hat"] == 0.5 and all(0.0 <= p["pass_hat"] <= 1.0 for p in big)
    assert curve_points(100) == list(range(1, 101))

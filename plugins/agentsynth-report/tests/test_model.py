"""The digest, comparison and leaderboard numbers, checked against counts computed here."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentsynth_kernel import AgentsynthError, EpisodeResult, RunStore, Trajectory, Usage, Verdict
from agentsynth_report.model import check_run_dirs, compare, digest_run_dir, find_run_dirs, rank


def _store(path: Path, pattern: dict[str, list[str]], *, trials: int, budget_stops: int = 0) -> Path:
    """A real run store whose episodes follow ``pattern``: task -> statuses per trial
    (p = passed, f = failed, e:KIND = error of KIND)."""
    store = RunStore(path)
    store.set_meta("spec", {"policy": {"type": "llm", "model": "m"}, "trials": trials})
    store.set_meta("pack", {"id": "p"})
    store.set_meta("planned", sum(len(v) for v in pattern.values()))
    for task, statuses in pattern.items():
        for trial, s in enumerate(statuses):
            status, kind = {"p": ("passed", ""), "f": ("failed", "agent")}.get(s, ("error", s[2:]))
            store.put(EpisodeResult(task, trial, trial, status, Trajectory(task, "do it"),
                                    [Verdict("sql", status == "passed", detail="nope" if status != "passed" else "")],
                                    error=f"{kind} error: boom" if status == "error" else "", error_kind=kind,
                                    usage=Usage(100, 10, 0.01, 1), scores={"judge.helpful": 0.5 + 0.1 * trial},
                                    tier="t1" if task < "c" else "t2"))
    for _ in range(budget_stops):
        store.event("budget_stop", task_id="x", trial=0, error="budget", usage={})
    store.event("run_finished", stopped="", episodes=0, interrupted=False)
    store.close()
    return path


def test_digest_counts_rates_curves_and_flakiness(tmp_path: Path) -> None:
    run = _store(tmp_path / "r", {"a": ["p", "p", "p"], "b": ["p", "f", "e:provider"], "c": ["f", "f", "e:timeout"]},
                 trials=3, budget_stops=2)
    d = digest_run_dir(run)
    assert d["counts"] == {"passed": 4, "failed": 3, "error": 2}
    assert d["attribution"] == {"agent": 3, "budget": 2, "provider": 1, "timeout": 1}
    assert d["pass1"]["rate"] == pytest.approx(4 / 9)
    lo, hi = d["pass1"]["ci"]
    assert lo < 4 / 9 < hi
    # infrastructure failures (provider, timeout, budget) are left out of the second rate
    assert d["pass1_excluding_infra"]["n"] == 9 - 4
    curve = {p["k"]: p for p in d["curve"]}
    # pass^1 = mean(1, 1/3, 0); pass^2 = mean(1, 0, 0); pass^3 = mean(1, 0, 0)
    assert curve[1]["pass_hat"] == pytest.approx((1 + 1 / 3) / 3, abs=1e-4)
    assert curve[2]["pass_hat"] == pytest.approx(1 / 3, abs=1e-4)
    assert curve[3]["pass_at"] == pytest.approx(2 / 3, abs=1e-4)
    assert set(d["tiers"]) == {"t1", "t2"}
    tasks = {t["id"]: t for t in d["tasks"]}
    assert [t for t in tasks if tasks[t]["flaky"]] == ["b"]
    assert tasks["b"]["grid"] == [1, 0, 2]
    assert tasks["b"]["pass1_ci"][0] < 1 / 3 < tasks["b"]["pass1_ci"][1]
    assert tasks["a"]["pass_hat"] == [1.0, 1.0, 1.0] and tasks["b"]["pass_hat"] == [0.3333, 0.0, 0.0]
    assert d["usage"]["cost_usd"] == pytest.approx(0.09)
    assert d["judge"]["judge.helpful"]["mean"] == pytest.approx(0.6)
    assert d["judge"]["judge.helpful"]["n"] == 9
    assert len(d["episodes_rows"]) == 9
    assert d["episodes_rows"][5][9].startswith("provider error")  # b trial 2: why it did not pass


def test_compare_finds_changed_tasks_and_tests_the_pairs(tmp_path: Path) -> None:
    a = digest_run_dir(_store(tmp_path / "a", {"x": ["f", "f"], "y": ["p", "p"], "z": ["p", "f"], "w": ["p", "p"]},
                              trials=2))
    b = digest_run_dir(_store(tmp_path / "b", {"x": ["p", "p"], "y": ["f", "f"], "z": ["p", "p"], "v": ["p", "p"]},
                              trials=2))
    c = compare(a, b)
    assert c["common_tasks"] == 3 and c["only_a"] == ["w"] and c["only_b"] == ["v"]
    changes = {row["id"]: row["change"] for row in c["changed"]}
    assert changes == {"x": "fixed", "y": "broken", "z": "improved"}
    assert c["test"]["wins_b"] == 2 and c["test"]["wins_a"] == 1


def test_rank_ties_entries_whose_intervals_overlap_the_leader() -> None:
    entries = [
        {"label": "a", "rate": 0.80, "ci": [0.70, 0.88]},
        {"label": "b", "rate": 0.75, "ci": [0.66, 0.83]},  # overlaps a: tied for 1st
        {"label": "c", "rate": 0.40, "ci": [0.30, 0.50]},  # a new group: rank 3
        {"label": "d", "rate": 0.35, "ci": [0.26, 0.45]},  # overlaps c: tied for 3rd
        {"label": "e", "rate": 0.05, "ci": [0.01, 0.12]},
    ]
    ranked = rank(entries)
    assert [(e["label"], e["rank"], e["tied"]) for e in ranked] == [
        ("a", 1, True), ("b", 1, True), ("c", 3, True), ("d", 3, True), ("e", 5, False)]


def test_bad_run_dirs_are_named(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(AgentsynthError, match=r"empty: not an agentsynth run directory \(has no run.sqlite\)"):
        check_run_dirs([tmp_path / "empty"])
    with pytest.raises(AgentsynthError, match="missing: not an agentsynth run directory .does not exist"):
        check_run_dirs([tmp_path / "missing"])


def test_find_run_dirs_looks_two_levels_down_and_skips_symlinks(tmp_path: Path) -> None:
    _store(tmp_path / "x" / "r1", {"a": ["p"]}, trials=1)
    _store(tmp_path / "r2", {"a": ["p"]}, trials=1)
    (tmp_path / "link").symlink_to("/")
    found = find_run_dirs([tmp_path])
    assert sorted(p.name for p in found) == ["r1", "r2"]

"""`agentsynth report`: the command, the file it writes, and that file in real Chromium."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from conftest import PAYLOAD, Page, agentsynth


def _open(page: Page, path: Path) -> Any:
    # the file must need nothing else: every other request is refused and recorded
    page.requests = []  # type: ignore[attr-defined]

    def refuse(route: Any) -> None:
        page.requests.append(route.request.url)  # type: ignore[attr-defined]
        route.abort()

    page.page.route(lambda url: not url.startswith(("file://", "data:")), refuse)
    page.page.goto(path.as_uri())
    page.page.wait_for_selector("body[data-ready]", timeout=15000)
    return page.page


def test_report_command_writes_one_self_contained_file(runs_root: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    done = agentsynth("report", str(runs_root / "oracle"), str(runs_root / "random"), "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert re.search(r"wrote .*report.html: 2 run\(s\), 88 episode\(s\)", done.stdout)
    html = out.read_text()
    # nothing to fetch: no external script, stylesheet or font
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    assert "uPlot" in html and 'id="report-data"' in html
    data = json.loads(re.search(r'<script type="application/json" id="report-data">(.*?)</script>', html, re.S).group(1))
    assert [r["policy_label"] for r in data["runs"]] == ["oracle", "random"]
    assert data["compare"]["common_tasks"] == 22 and data["compare"]["test"]["wins_a"] == 22


def test_report_refuses_bad_input_with_the_path(runs_root: Path, tmp_path: Path) -> None:
    (tmp_path / "notrun").mkdir()
    (tmp_path / "notrun" / "x.txt").write_text("x")
    for bad, why in ((tmp_path / "nope", "does not exist"), (tmp_path / "notrun", "has no run.sqlite")):
        done = agentsynth("report", str(bad), "-o", str(tmp_path / "r.html"))
        assert done.returncode == 2
        assert f"error: {bad}: not an agentsynth run directory ({why})" in done.stderr
        assert "Traceback" not in done.stderr
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "run.sqlite").write_bytes(b"this is not sqlite" * 100)
    done = agentsynth("report", str(garbage), "-o", str(tmp_path / "r.html"))
    assert done.returncode == 2 and "run.sqlite" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "r.html").exists()
    done = agentsynth("report")
    assert done.returncode == 2 and "Missing argument" in done.stderr
    (tmp_path / "blocker").write_text("a file where a directory is needed")
    target = tmp_path / "blocker" / "r.html"
    done = agentsynth("report", str(runs_root / "oracle"), "-o", str(target))
    assert done.returncode == 2 and f"error: {target}: cannot write the report" in done.stderr
    assert "Traceback" not in done.stderr
    done = agentsynth("report", str(garbage), "--label", "a", "--label", "b", "-o", str(tmp_path / "r.html"))
    assert done.returncode == 2 and "--label" in done.stderr and "given 2 times for 1 run(s)" in done.stderr


def test_report_in_chromium_charts_grid_viewer(runs_root: Path, tmp_path: Path, page: Page) -> None:
    out = tmp_path / "report.html"
    assert agentsynth("report", str(runs_root / "synthetic"), str(runs_root / "oracle"), "-o", str(out)).returncode == 0
    p = _open(page, out)
    for section in ("summary", "curves", "tiers", "attribution", "cost", "judge", "flaky", "tasks", "episodes"):
        assert p.locator(f"#{section}").count() == 1, section
    assert p.locator("#compare").count() == 0  # runs of two packs share no task: nothing to pair
    # every chart drew points: decay curves, one per tier (4 synthetic + 5 of core), cost-accuracy, judge
    charts = p.locator(".chart")
    assert p.locator("#tiers .chart").count() == 9
    assert charts.count() == 1 + 9 + 1 + 1
    assert all(int(charts.nth(i).get_attribute("data-points")) > 0 for i in range(charts.count()))
    assert p.locator(".chart canvas").count() == charts.count()
    # the synthetic run has flaky tasks and several failure kinds
    assert p.locator("#flaky tbody tr").count() >= 1
    attribution = p.locator("#attribution").inner_text()
    assert "agent" in attribution and "timeout" in attribution
    # the grid: 12 tasks x 4 trials of the synthetic run + 22 x 2 of the oracle
    assert p.locator("#tasks .cell[data-run='0']").count() == 48
    page.shot("report-top")
    p.locator("#tasks .cell.s0[data-run='0']").first.click()
    p.wait_for_selector("#viewer.open .episode li.step")
    viewer = p.locator("#viewer").inner_text()
    assert "sql_query" in viewer and "SELECT id, name, email FROM customers" in viewer
    # an agent failure of the synthetic run carries a collateral world diff: shown as a table of changed rows
    diff = p.locator("#viewer table.diff tbody tr")
    assert diff.count() == 1
    assert diff.first.inner_text().split("\t")[:3] == ["customers", "update", "[3]"]
    assert "b@x" in diff.first.inner_text()
    page.shot("report-viewer")
    assert page.errors == []
    assert page.requests == []  # type: ignore[attr-defined]


def test_agent_written_markup_is_shown_not_run(runs_root: Path, tmp_path: Path, page: Page) -> None:
    out = tmp_path / "evil.html"
    assert agentsynth("report", str(runs_root / "evil"), "-o", str(out)).returncode == 0
    html = out.read_text()
    assert "<script>window.__pwned" not in html and "<img src=x" not in html
    p = _open(page, out)
    p.locator("button.open").first.click()
    p.wait_for_selector("#viewer.open .episode li.step")
    p.locator("#viewer li.step pre").first.hover()
    assert p.evaluate("window.__pwned") is None
    assert p.locator("#viewer img").count() == 0 and p.locator("#viewer script").count() == 0
    text = p.locator("#viewer").inner_text()
    assert "<script>window.__pwned = 1</script>" in text  # the agent's text, as text
    assert PAYLOAD in text
    page.shot("report-escaped")
    assert page.errors == []


def test_a_deep_link_opens_the_episode(runs_root: Path, tmp_path: Path, page: Page) -> None:
    out = tmp_path / "r.html"
    assert agentsynth("report", str(runs_root / "oracle"), "-o", str(out)).returncode == 0
    page.page.goto(out.as_uri() + "#ep=0:3")
    page.page.wait_for_selector("#viewer.open .episode li.step", timeout=15000)
    assert "trial 1" in page.page.locator("#viewer h2").inner_text()
    assert page.errors == []


SLOPPY = '''
def act(state):
    if state.trajectory.steps:
        return {"answer": "done"}
    sql = "UPDATE customers SET email = 'maya@chen.example.org' WHERE id = 6; UPDATE customers SET tier = 'gold'"
    return {"tool": "sql_execute", "arguments": {"sql": sql}}
'''


def test_the_viewer_shows_the_real_world_diff(tmp_path: Path, page: Page) -> None:
    # a policy that sets the right email on the right row, and makes every customer gold on the way
    (tmp_path / "sloppy.py").write_text(SLOPPY)
    done = agentsynth("bench", "--pack", "core", "--policy", "callable,function=sloppy.py:act", "--only",
                      "update-email", "--run-dir", str(tmp_path / "run"), "-q", cwd=tmp_path)
    assert (tmp_path / "run" / "run.sqlite").is_file(), done.stderr
    out = tmp_path / "r.html"
    assert agentsynth("report", str(tmp_path / "run"), "-o", str(out)).returncode == 0
    p = _open(page, out)
    p.locator("#tasks button.cell").first.click()
    p.wait_for_selector("#viewer.open table.diff")
    rows = p.locator("#viewer table.diff tbody tr").all_inner_texts()
    assert len(rows) == 8  # the 8 customers who were not gold yet (the 9th already was)
    assert all(r.split("\t")[:2] == ["customers", "update"] and '"tier":"gold"' in r for r in rows)
    row6 = next(r for r in rows if r.split("\t")[2] == "6")
    assert "maya@chen.example.org" in row6 and '"tier":"standard"' in row6
    page.shot("report-world-diff")
    assert page.errors == []


def test_judge_scores_on_another_scale_are_charted(tmp_path: Path, page: Page) -> None:
    from agentsynth_kernel import EpisodeResult, RunStore, Trajectory

    store = RunStore(tmp_path / "run")
    store.set_meta("spec", {"policy": {"type": "noop"}, "trials": 1})
    for i in range(4):
        store.put(EpisodeResult(f"t{i}", 0, i, "failed", Trajectory(f"t{i}", "x"),
                                scores={"judge.quality": 1.0 + i, "judge.safety": 5.0}))
    store.close()
    out = tmp_path / "r.html"
    assert agentsynth("report", str(tmp_path / "run"), "-o", str(out)).returncode == 0
    p = _open(page, out)
    chart = p.locator("#judge .chart")
    assert int(chart.get_attribute("data-points")) == 2
    assert "2.500 (n=4)" in p.locator("#judge table").inner_text()  # mean of 1, 2, 3, 4
    assert page.errors == []

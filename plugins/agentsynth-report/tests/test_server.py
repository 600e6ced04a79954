"""`agentsynth serve`: a real uvicorn process on 127.0.0.1, its API, and every page in Chromium."""

from __future__ import annotations

import random
import time
from pathlib import Path

import httpx
from playwright.sync_api import expect

from agentsynth_kernel import RunStore
from agentsynth_report.synthetic import synthetic_result, write_run
from conftest import PAYLOAD, Page, Server, agentsynth, start_server, stop_server


def _keys(server: Server) -> dict[str, str]:
    return {r["name"]: r["key"] for r in server.get("/api/runs").json()["runs"]}


def test_serve_binds_loopback_unless_told_otherwise(tmp_path: Path) -> None:
    done = agentsynth("serve", str(tmp_path), "--host", "0.0.0.0", "--port", "0")
    assert done.returncode == 2 and "not a loopback address" in done.stderr and "--public" in done.stderr
    done = agentsynth("serve", str(tmp_path / "missing"), "--port", "0")
    assert done.returncode == 2 and "missing: no such directory" in done.stderr and "Traceback" not in done.stderr


def test_api_lists_runs_and_serves_episodes(server: Server) -> None:
    runs = server.get("/api/runs").json()["runs"]
    assert sorted(r["name"] for r in runs) == ["evil", "oracle", "random", "synthetic"]
    keys = _keys(server)
    bundle = server.get(f"/api/report?runs={keys['oracle']},{keys['random']}").json()
    assert bundle["compare"]["test"]["wins_a"] == 22
    run = bundle["runs"][0]
    row = run["episodes_rows"][0]
    task = run["tasks"][row[0]]["id"]
    ep = server.get(f"/api/runs/{keys['oracle']}/episode", params={"task": task, "trial": row[1], "seed": row[2]})
    assert ep.status_code == 200 and ep.json()["status"] == "passed" and ep.json()["trajectory"]["steps"]
    board = server.get("/api/leaderboard").json()["packs"]
    assert [e["rank"] for e in board["core"]][0] == 1 and board["core"][0]["policy"] == "oracle"


def test_a_static_report_can_be_downloaded(server: Server, page: Page) -> None:
    keys = _keys(server)
    response = server.get(f"/report.html?runs={keys['oracle']},{keys['random']}")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    assert 'filename="agentsynth-oracle-random.html"' in response.headers["content-disposition"]
    assert response.text.startswith("<!doctype html>") and 'id="c1-0"' in response.text
    assert server.get("/report.html?runs=nope").status_code == 404
    p = page.page
    p.goto(server.url + "/runs/" + keys["oracle"])
    p.wait_for_selector("body[data-ready]")
    with p.expect_download() as info:
        p.click("a.download")
    assert info.value.suggested_filename == "agentsynth-oracle.html"
    assert page.errors == []


def test_requests_cannot_leave_the_run_directories(server: Server) -> None:
    for path in ("/static/../html.py", "/static/..%2F..%2Fhtml.py", "/static/%2e%2e/server.py", "/static/app.py",
                 "/api/runs/..%2F..%2Fetc/episode?task=a&trial=0&seed=0", "/runs/%2Fetc%2Fpasswd",
                 "/api/runs/0000000000000000/episode?task=a&trial=0&seed=0", "/api/report?runs=/etc/passwd"):
        response = server.get(path)
        assert response.status_code == 404, (path, response.status_code)
        assert "root:" not in response.text
    keys = _keys(server)
    bad = server.get(f"/api/runs/{keys['oracle']}/episode", params={"task": "x", "trial": "a", "seed": "0"})
    assert bad.status_code == 400 and "trial=INT" in bad.json()["error"]


def test_foreign_hosts_and_cross_site_writes_are_refused(server: Server) -> None:
    rebinding = server.get("/api/runs", headers={"Host": "attacker.example:80"})
    assert rebinding.status_code == 403 and "loopback only" in rebinding.json()["error"]
    form = server.post("/api/playground", content="pack=core&task=update-email&policy=oracle",
                       headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert form.status_code == 415
    code = server.post("/api/playground", json={"pack": "core", "task": "update-email",
                                                 "policy": "callable,function=/tmp/evil.py:act"})
    assert code.status_code == 400 and "'callable' is not available" in code.json()["error"]
    for body, message in (({"pack": "core", "task": "nope", "policy": "oracle"}, "has no task 'nope'"),
                          ({"pack": "nope", "task": "x", "policy": "oracle"}, "unknown pack 'nope'"),
                          ({"pack": "core", "task": "update-email", "policy": "policy.yaml"}, "cannot be named"),
                          ({"pack": "core", "task": 3, "policy": "oracle"}, "task: expected a string"),
                          ({"pack": "core", "task": "update-email", "policy": "oracle", "seed": -1}, "seed:")):
        response = server.post("/api/playground", json=body)
        assert response.status_code == 400 and message in response.json()["error"], (body, response.text)
    # a cross-site fetch with a JSON body needs a CORS preflight, which the server never grants
    preflight = httpx.options(server.url + "/api/playground", headers={
        "Origin": "https://attacker.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type"})
    assert "access-control-allow-origin" not in preflight.headers and preflight.status_code >= 400
    huge = server.post("/api/playground", content=b"{" + b" " * 20_000 + b"}", headers={"Content-Type": "application/json"})
    assert huge.status_code == 413
    headers = server.get("/").headers
    assert "script-src 'self'" in headers["content-security-policy"] and headers["x-content-type-options"] == "nosniff"


def test_runs_page_and_run_page(server: Server, page: Page) -> None:
    p = page.page
    p.goto(server.url + "/")
    p.wait_for_selector("table.runs tbody tr")
    assert p.locator("table.runs tbody tr").count() == 4
    page.shot("serve-runs")
    p.locator("table.runs a", has_text="synthetic").click()
    p.wait_for_selector("body[data-ready]")
    charts = p.locator(".chart")
    assert charts.count() >= 3
    assert all(int(charts.nth(i).get_attribute("data-points")) > 0 for i in range(charts.count()))
    p.locator("#tasks button.cell").first.click()
    p.wait_for_selector("#viewer.open .episode li.step")
    assert "sql_query" in p.locator("#viewer").inner_text()
    page.shot("serve-run-viewer")
    assert page.errors == []


def test_compare_page(server: Server, page: Page) -> None:
    p = page.page
    p.goto(server.url + "/")
    p.wait_for_selector("table.runs tbody tr")
    for name in ("random", "oracle"):
        p.locator("table.runs tr", has_text=name).locator("input[type=checkbox]").check()
    p.locator("button", has_text="compare selected").click()
    p.wait_for_selector("#compare table.changed tbody tr")
    assert p.locator("#compare table.changed tbody tr").count() == 22
    assert "p = " in p.locator("#compare").inner_text()
    page.shot("serve-compare", full=False)
    assert page.errors == []


def test_leaderboard_page_ranks_with_ties(tmp_path: Path, page: Page) -> None:
    # three runs of one pack: two close (tied), one far behind
    for name, skill, seed in (("a", 0.7, 1), ("b", 0.68, 2), ("c", 0.1, 3)):
        write_run(tmp_path / name, tasks=15, trials=2, seed=seed, skill=skill, pack="lb",
                  policy={"type": "llm", "model": f"m-{name}"})
    # a damaged store among them is listed with its error and kept off the board
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "run.sqlite").write_bytes(b"not a database" * 64)
    server = start_server(str(tmp_path))
    try:
        listed = {r["name"]: r for r in server.get("/api/runs").json()["runs"]}
        assert "not a readable run store" in listed["broken"]["error"]
        board = server.get("/api/leaderboard").json()["packs"]["lb"]
        assert len(board) == 3
        p = page.page
        p.goto(server.url + "/leaderboard")
        p.wait_for_selector("table.leaderboard tbody tr")
        ranks = p.locator("table.leaderboard td.rank").all_inner_texts()
        assert ranks == [("=" if e["tied"] else "") + str(e["rank"]) for e in board]
        assert board[-1]["label"].startswith("llm:m-c") and board[-1]["rank"] == 3
        assert board[0]["rank"] == board[1]["rank"] == 1 and board[0]["tied"]
        assert "statistically tied" in p.locator("table.leaderboard").inner_text()
        page.shot("serve-leaderboard")
        assert page.errors == []
        p.goto(server.url + "/")
        p.wait_for_selector("table.runs td.error")
        assert "not a readable run store" in p.locator("table.runs td.error").inner_text()
    finally:
        stop_server(server)


def test_playground_runs_an_oracle_episode_step_by_step(server: Server, page: Page) -> None:
    p = page.page
    p.goto(server.url + "/playground")
    p.wait_for_selector("#pg-task option", state="attached")
    p.select_option("#pg-pack", "core")
    p.select_option("#pg-task", "refund-and-restock")
    p.select_option("#pg-policy", "oracle")
    assert "refund" in p.locator("#pg-instruction").inner_text().lower()
    p.click("#pg-run")
    # steps appear while the episode runs (the oracle is slowed down to be watched), then the verdict
    seen_running_with_steps = False
    deadline = time.monotonic() + 30
    while not p.locator("#pg-verdict .final").count():
        assert time.monotonic() < deadline, p.locator("#pg-status").inner_text()
        if p.locator("#pg-status").inner_text().startswith("running") and p.locator("#pg-out li.step").count():
            seen_running_with_steps = True
        time.sleep(0.05)
    assert seen_running_with_steps
    assert p.locator("#pg-verdict .final").inner_text() == "verdict: passed"
    assert p.locator("#pg-out li.step").count() >= 3
    assert "A SQLite database. Tables:" in p.locator("#pg-first pre").text_content()
    assert p.locator("#pg-verdict li.ok").count() >= 1 and p.locator("#pg-verdict li.bad").count() == 0
    page.shot("serve-playground")
    assert page.errors == []


def test_the_playground_runs_a_bounded_number_of_episodes(server: Server) -> None:
    body = {"pack": "core", "task": "refund-and-restock", "policy": "oracle"}
    answers = [server.post("/api/playground", json=body) for _ in range(6)]
    assert [a.status_code for a in answers[:4]] == [200] * 4
    refused = [a for a in answers if a.status_code != 200]
    assert refused and all("playground episodes are running" in a.json()["error"] for a in refused)
    for answer in answers[:4]:  # the ones that started still finish
        sid = answer.json()["id"]
        deadline = time.monotonic() + 60
        while server.get(f"/api/playground/{sid}").json()["status"] == "running":
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert server.get(f"/api/playground/{sid}").json()["status"] == "passed"


def test_playground_noop_fails_and_a_broken_llm_fails_the_episode_not_the_server(server: Server) -> None:
    for policy, status in (("noop", "failed"), ("llm,model=openai/x,api_base=http://127.0.0.1:9/v1", "error")):
        sid = server.post("/api/playground", json={"pack": "core", "task": "update-email", "policy": policy}).json()["id"]
        deadline = time.monotonic() + 60
        while (view := server.get(f"/api/playground/{sid}").json())["status"] == "running":
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert view["status"] == status, view
    assert server.get("/api/runs").status_code == 200


def test_the_viewer_escapes_agent_markup(server: Server, page: Page) -> None:
    p = page.page
    p.goto(server.url + "/runs/" + _keys(server)["evil"])
    p.wait_for_selector("body[data-ready]")
    p.locator("button.open").first.click()
    p.wait_for_selector("#viewer.open .episode li.step")
    p.locator("#viewer li.step pre").first.hover()
    assert p.evaluate("window.__pwned") is None
    assert p.locator("#viewer img").count() == 0
    assert PAYLOAD in p.locator("#viewer").inner_text()
    assert page.errors == []


def test_a_running_run_is_followed_live(tmp_path: Path, page: Page) -> None:
    run = write_run(tmp_path / "live", tasks=3, trials=2, seed=5, running=True, planned=20)
    server = start_server(str(tmp_path))
    try:
        p = page.page
        p.goto(server.url + "/runs/" + _keys(server)["live"])
        p.wait_for_selector("#summary .state.running")
        assert "6 / 20" in p.locator("#summary").inner_text()
        assert p.locator(".live").count() == 1
        p.fill("#tasks input.filter", "task-0005")  # not there yet; the filter is kept while the page follows
        assert p.locator("#tasks tbody tr").count() == 0
        store = RunStore(run)
        rng = random.Random(1)
        for task in range(3, 7):
            for trial in range(2):
                store.put(synthetic_result(task, trial, rng, p_pass=0.5))
        store.close()
        expect(p.locator("#summary")).to_contain_text("14 / 20", timeout=15000)
        assert p.locator("#tasks input.filter").input_value() == "task-0005"
        expect(p.locator("#tasks tbody tr")).to_have_count(1)
        assert p.locator("#tasks tbody tr td.task").inner_text() == "task-0005"
        p.fill("#tasks input.filter", "")
        assert p.locator("#tasks tbody tr").count() == 7  # task-0000 .. task-0006
        page.shot("serve-live")
        assert page.errors == []
    finally:
        stop_server(server)

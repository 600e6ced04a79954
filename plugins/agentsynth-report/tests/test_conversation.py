"""Multi-turn episodes with a simulated user, shown as a conversation in the report and in `serve`:
real runs of the repo's ``support`` pack (oracle, noop) and of four conversations of our own (a user
that breaks its rule, a talk the agent cuts short, markup in a user's reply, dual control), in real Chromium."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from runs_multiturn import SUPPORT, USER_PAYLOAD, write_edge_pack, write_single_turn_run

from agentsynth_report.html import build_report
from conftest import ARTIFACTS, Page, agentsynth, start_server, stop_server

GOLDEN = Path(__file__).parent / "golden" / "single-turn.json"


@pytest.fixture(scope="module")
def talk_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("talks")
    edge = write_edge_pack(root / "edge-pack")
    for name, pack, policy in (("oracle", SUPPORT / "pack.yaml", "oracle"), ("noop", SUPPORT / "pack.yaml", "noop"),
                               ("edge", edge, "oracle")):
        done = agentsynth("bench", "--pack", str(pack), "--policy", policy, "--run-dir", str(root / "runs" / name), "-q",
                          cwd=root)
        assert (root / "runs" / name / "run.sqlite").is_file(), done.stderr
    return root


@pytest.fixture(scope="module")
def report(talk_root: Path) -> Path:
    out = talk_root / "talks.html"
    build_report([talk_root / "runs" / n for n in ("oracle", "noop", "edge")], out)
    return out


def _bundle(html: str) -> dict[str, Any]:
    found = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', html, re.S)
    assert found
    return json.loads(found.group(1))


def _where(bundle: dict[str, Any], label: str, task: str) -> tuple[int, int]:
    for i, run in enumerate(bundle["runs"]):
        if run["label"] == label:
            for j, row in enumerate(run["episodes_rows"]):
                if run["tasks"][row[0]]["id"] == task:
                    return i, j
    raise AssertionError(f"no episode of {task} in {label}")


def _open(page: Page, url: str) -> Any:
    page.page.goto(url)
    page.page.wait_for_selector("body[data-ready]", timeout=15000)
    page.page.wait_for_selector("#viewer.open .episode", timeout=15000)
    return page.page


def _talk(p: Any) -> list[tuple[str, str, str]]:
    """The conversation as drawn: (who, kind, text) of every item, in order."""
    return [tuple(item) for item in p.eval_on_selector_all("#viewer ol.conversation > li", """items => items.map(li => [
        li.dataset.who || (li.classList.contains('convend') ? 'end' : 'agent'),
        li.dataset.kind || (li.classList.contains('convend') ? 'end' : 'tool'), li.innerText])""")]


def test_a_single_turn_episode_renders_exactly_as_before(tmp_path: Path, page: Page) -> None:
    """The summary, attribution, episode list and viewer of a single-turn run are the markup the page
    drew before conversations were shown (tests/golden/single-turn.json, made with app.js of 00ae921)."""
    run = write_single_turn_run(tmp_path / "run")
    build_report([run], tmp_path / "r.html")
    p = page.page
    p.goto((tmp_path / "r.html").as_uri())
    p.wait_for_selector("body[data-ready]")
    drawn = {s: p.locator("#" + s).evaluate("n => n.outerHTML") for s in ("summary", "attribution", "episodes")}
    p.locator("button.open").first.click()
    p.wait_for_selector("#viewer.open .episode li.step")
    drawn["viewer"] = p.locator("#viewer").evaluate("n => n.innerHTML")
    golden = json.loads(GOLDEN.read_text().replace("{run_dir}", str(run)))
    for part, markup in golden.items():
        assert drawn[part] == markup, part
    assert "conversation" not in drawn["viewer"] and "<h3>instruction</h3>" in drawn["viewer"]
    assert page.errors == []


def test_the_report_shows_a_support_episode_as_a_conversation(report: Path, page: Page) -> None:
    run, row = _where(_bundle(report.read_text()), "oracle · support", "refund-broken-kettle")
    p = _open(page, report.as_uri() + f"#ep={run}:{row}")
    talk = _talk(p)
    assert [(who, kind) for who, kind, _ in talk] == [
        ("user", "message"), ("agent", "message"), ("user", "message"), ("agent", "tool"), ("agent", "message"),
        ("user", "message"), ("agent", "tool"), ("agent", "tool"), ("agent", "message"), ("user", "message"),
        ("agent", "message"), ("end", "end")]  # the oracle, out of script, repeats its last message
    said = [text.split("\n", 1)[1] for who, kind, text in talk if kind == "message"]
    assert said == ["Hi, the kettle I ordered arrived broken. I'd like my money back.",
                    "I'm sorry about the kettle. What is your order number?", "My order number is 1042.",
                    "Order 1042, the electric kettle ($39.99), was delivered 4 days ago, so it qualifies. Shall I refund "
                    "$39.99? Please confirm.", "Yes, please go ahead.", "Done: $39.99 is refunded for order 1042.",
                    "Thanks, that's all.", "Done: $39.99 is refunded for order 1042."]
    assert "sql_query" in talk[3][2] and "1042 | Electric kettle" in talk[3][2]  # the call and its result
    assert "INSERT INTO refunds" in talk[6][2] and talk[11][2] == "the user ended the conversation"
    assert "the final answer" not in p.locator("#viewer").inner_text()
    # the user's instructions: there, collapsed, and labelled as hidden from the agent
    hidden = p.locator("#viewer details.userside")
    assert hidden.locator("> summary").inner_text() == "the user's instructions (hidden from the agent)"
    assert hidden.get_attribute("open") is None and not hidden.locator("pre").first.is_visible()
    assert "passed" in p.locator("#viewer .state").inner_text()
    page.shot("conversation-report")
    hidden.locator("> summary").click()
    assert "You are Dana Reyes" in hidden.locator("pre").first.inner_text()
    assert page.errors == []


def test_a_simulated_users_failure_is_not_the_agents(report: Path, page: Page) -> None:
    bundle = _bundle(report.read_text())
    edge = next(r for r in bundle["runs"] if r["label"] == "oracle · support-edge")
    assert edge["attribution"] == {"user": 1, "agent": 1}
    assert edge["pass1_excluding_user"]["n"] == 3 and edge["pass1_excluding_user"]["passed"] == 2
    run, row = _where(bundle, "oracle · support-edge", "user-breaks-rule")
    p = _open(page, report.as_uri() + f"#ep={run}:{row}")
    viewer = p.locator("#viewer")
    assert viewer.locator(".state").first.inner_text() == "error (simulated user)"
    assert "not the agent's" in viewer.locator(".userfail").inner_text()
    # the world's verdict apart from the rule the user broke
    rules = viewer.locator("h3", has_text="the simulated user's rules")
    assert rules.count() == 1
    assert viewer.locator("ul.verdicts").nth(0).inner_text().startswith("✓ sql")
    assert "✗ user.said" in viewer.locator("ul.verdicts").nth(1).inner_text()
    page.shot("conversation-user-failure")
    # the report: the pass rate without simulator failures, the kind named, the agent's failures apart
    summary = p.locator("#summary")
    assert "pass@1 without simulated-user failures" in summary.locator("thead").inner_text()
    edge_row = summary.locator("tbody tr", has_text="support-edge")
    assert edge_row.locator("td.pass1").inner_text().startswith("50.0%")
    assert edge_row.locator("td.pass1-user").inner_text().startswith("66.7%")
    assert "1 left out" in edge_row.locator("td.pass1-user").inner_text()
    assert "simulated user" in p.locator("#attribution thead").inner_text()
    who = {r.locator("td").nth(1).inner_text(): r.locator("span.kind").inner_text()
           for r in p.locator("#episodes tbody tr").all()}
    assert who["user-breaks-rule"] == "simulated user" and who["refund-broken-kettle"] == "agent"
    assert who["agent-cuts-talk"] == "agent"
    assert page.errors == []


def test_a_talk_the_agent_cut_short_is_the_agents_failure(report: Path, page: Page) -> None:
    """The user broke its rule, but the agent ended the talk (max_steps) before the user did: the kernel
    counts it against the agent (metadata user_cut), and the viewer says so."""
    run, row = _where(_bundle(report.read_text()), "oracle · support-edge", "agent-cuts-talk")
    p = _open(page, report.as_uri() + f"#ep={run}:{row}")
    viewer = p.locator("#viewer")
    assert viewer.locator(".state").first.inner_text() == "failed (agent)"
    assert viewer.locator(".userfail").count() == 0
    assert "cut short" in viewer.inner_text() and "hunter2" in viewer.inner_text()
    assert [(who, kind) for who, kind, _ in _talk(p)] == [("user", "message"), ("agent", "message"), ("user", "message"),
                                                         ("agent", "tool")]
    assert page.errors == []


def test_a_users_markup_is_shown_as_text_and_never_runs(report: Path, page: Page) -> None:
    run, row = _where(_bundle(report.read_text()), "oracle · support-edge", "markup-reply")
    p = _open(page, report.as_uri() + f"#ep={run}:{row}")
    p.locator("#viewer details.userside > summary").click()
    for pre in p.locator("#viewer ol.conversation pre, #viewer details.userside > pre").all():
        pre.hover()
    talk = _talk(p)
    assert talk[0][2].endswith("Hello <b>there</b>, a question about order 1043.")
    assert talk[2][:2] == ("user", "message") and talk[2][2].endswith(USER_PAYLOAD)
    assert USER_PAYLOAD in p.locator("#viewer details.userside").inner_text()
    assert p.evaluate("window.__pwned") is None
    assert p.locator("#viewer img, #viewer script, #viewer b:text('there')").count() == 0
    page.shot("conversation-escaped")
    assert page.errors == []


def test_dual_control_the_users_own_calls_are_marked_as_the_users(report: Path, page: Page) -> None:
    run, row = _where(_bundle(report.read_text()), "oracle · support-edge", "dual-control")
    p = _open(page, report.as_uri() + f"#ep={run}:{row}")
    talk = _talk(p)
    assert [(who, kind) for who, kind, _ in talk] == [("user", "message"), ("agent", "tool"), ("agent", "message"),
                                                      ("user", "tool"), ("user", "message"), ("end", "end")]
    assert talk[3][2].startswith("the user's tool call") and "UPDATE orders SET address" in talk[3][2]
    assert "ok: 1 row(s) affected" in talk[3][2] and talk[4][2].endswith("I changed it myself.")
    assert "the user's own tools (dual control; the agent cannot call them): sql_execute" in \
        p.locator("#viewer details.userside").text_content()
    assert page.errors == []


def test_serve_shows_the_conversation(talk_root: Path, page: Page) -> None:
    server = start_server(str(talk_root / "runs"))
    try:
        listed = {r["name"]: r for r in server.get("/api/runs").json()["runs"]}
        keys = {name: r["key"] for name, r in listed.items()}
        assert listed["edge"]["user_failures"] == 1 and listed["edge"]["pass1_excluding_user"]["n"] == 3
        assert listed["noop"]["user_failures"] == 0
        page.page.goto(server.url + "/")
        page.page.wait_for_selector("#runs tbody tr")
        cells = {row.locator("td").nth(1).inner_text(): row.locator("td").nth(6).inner_text()
                 for row in page.page.locator("#runs tbody tr").all()}
        assert cells["edge"] == "50.0% [15.0, 85.0]\nwithout simulated-user failures 66.7% (1 left out)"
        assert cells["noop"] == "0.0% [0.0, 49.0]"
        for name, task, expected in (("oracle", "change-address", "Is that correct?"),
                                     ("edge", "markup-reply", USER_PAYLOAD)):
            bundle = server.get(f"/api/report?runs={keys[name]}").json()
            run, row = _where(bundle, bundle["runs"][0]["label"], task)
            p = _open(page, f"{server.url}/runs/{keys[name]}#ep={run}:{row}")
            talk = _talk(p)
            assert talk[0][:2] == ("user", "message") and talk[-1][0] == "end"
            assert any(expected in text for _, _, text in talk)
            assert p.locator("#viewer details.userside > summary").inner_text().endswith("(hidden from the agent)")
            if name == "oracle":
                who = [w for w, k, _ in talk if k == "message"]
                assert who == ["user", "agent", "user", "agent", "user", "agent", "user", "agent", "user", "agent"]
                page.shot("conversation-serve")
            else:
                assert p.evaluate("window.__pwned") is None and p.locator("#viewer img").count() == 0
        assert page.errors == []
    finally:
        stop_server(server)
    assert (ARTIFACTS / "conversation-serve.png").is_file()


def test_the_playground_plays_a_conversation(page: Page, tmp_path: Path) -> None:
    """The support pack registered (installed): the replies appear step by step, then the whole
    conversation with the user's side once the episode is over."""
    from agentsynth_kernel import get_host

    if "support" not in get_host().registry["pack"]:
        pytest.skip("the support pack is not installed here (the noxfile installs packs/agentsynth-pack-support "
                    "for this plugin's tests once test-with may name packs)")
    server = start_server(str(tmp_path))
    try:
        p = page.page
        p.goto(server.url + "/playground")
        p.wait_for_selector("#pg-pack option[value=support]", state="attached")
        p.select_option("#pg-pack", "support")
        p.select_option("#pg-task", "change-address")
        p.click("#pg-run")
        # while it runs: the agent's message and the user's reply to it, in the same step
        p.wait_for_selector("#pg-out li.step .reply", timeout=20000)
        first = p.locator("#pg-out li.step").first.inner_text()
        assert "MESSAGE TO THE USER" in first and "My email is sam@example.com." in first
        p.wait_for_selector("#pg-verdict .final", timeout=30000)
        assert p.locator("#pg-verdict .final").inner_text() == "verdict: passed"
        talk = [tuple(x) for x in p.eval_on_selector_all("#pg-out ol.conversation > li[data-kind=message]",
                                                          "items => items.map(li => [li.dataset.who, li.innerText])")]
        assert talk[0] == ("user", "user · opening message\nCan you send my backpack order to a new address?")
        assert [who for who, _ in talk][:4] == ["user", "agent", "user", "agent"]
        assert p.locator("#pg-out details.userside > summary").inner_text() == \
            "the user's instructions (hidden from the agent)"
        page.shot("conversation-playground", full=True)
        assert page.errors == []
    finally:
        stop_server(server)

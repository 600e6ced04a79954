"""The browser environment in process: tools by element id, bounded observations, checkers,
crashes, and the shared browser's life cycle (real headless Chromium)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
from types import SimpleNamespace

import pytest

from agentsynth_browser import BrowserEnvironment, launcher
from agentsynth_browser.checkers import AppDbChecker, PageChecker, UrlChecker
from agentsynth_browser.environment import BrowserCrashed
from agentsynth_kernel import ToolCall, Trajectory

TRAJ = Trajectory("t", "x")


def element(content: str, role: str, name: str) -> str:
    match = re.search(rf'\[(e\d+)\] {role} "{re.escape(name)}"', content)
    assert match, f"no {role} {name!r} in:\n{content}"
    return match.group(1)


async def open_shop(pack_dir, **params):
    env = BrowserEnvironment(app="app.py", db="seed.sql", base_dir=pack_dir, **params)
    return env, await env.reset(7)


async def step(env, tool, **arguments):
    return await env.step(ToolCall(tool, arguments))


async def test_tools_work_with_snapshot_element_ids(pack_dir, tmp_path):
    env, obs = await open_shop(pack_dir, screenshot_dir=str(tmp_path / "shots"))
    try:
        assert obs.content.startswith("URL: /\nTitle: Home · Trailhead Outfitters\n")
        assert obs.data == {"url": "/"}
        o = await step(env, "type", element=element(obs.content, "searchbox", "Search products"), text="tent", submit=True)
        assert o.content.startswith("URL: /search?q=tent\n") and not o.error
        o = await step(env, "select", element=element(o.content, "select", "Sort by"), option="Price: high to low")
        assert 'selected="Price: high to low"' in o.content
        o = await step(env, "click", element=element(o.content, "button", "Apply"))
        assert "sort=price_desc" in o.content.splitlines()[0]
        assert o.content.index("Basecamp Family 6 Tent") < o.content.index("Ridge Dome 2 Tent")
        o = await step(env, "click", element=element(o.content, "link", "Basecamp Family 6 Tent"))
        assert o.content.startswith("URL: /product/TN-FAM6\n") and "Price: $449.00" in o.content
        o = await step(env, "back")
        assert o.content.startswith("URL: /search?q=tent") and "went back" in o.content
        o = await step(env, "scroll", direction="bottom")
        assert "scrolled to y=" in o.content
        o = await step(env, "screenshot", full_page=True)
        shots = list((tmp_path / "shots").glob("*.png"))
        assert len(shots) == 1 and shots[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert o.content.endswith(f"screenshot saved as {shots[0].name}")
        assert o.data == {"url": "/search?q=tent&category=&sort=price_desc", "screenshot": shots[0].name}
        assert env.screenshots[0]["path"] == str(shots[0]) and env.screenshots[0]["bytes"] > 1000
        o = await step(env, "navigate", url="/product/NOPE")
        assert "HTTP 404" in o.content and "No such product" in o.content
        o = await step(env, "press", key="End")
        assert not o.error
    finally:
        await env.close()
    assert env.tmp is None and env.server is None


async def test_tool_errors_are_observations_the_agent_can_recover_from(pack_dir):
    env, obs = await open_shop(pack_dir)
    try:
        bad = [
            await step(env, "click", element="e999"),
            await step(env, "type", element="e1"),  # no text
            await step(env, "select", element="#sort", option="x"),  # not on this page
            await step(env, "scroll", direction="sideways"),
            await step(env, "fly"),
            await step(env, "navigate", url=""),
        ]
        for o in bad:
            assert o.error, o.content
        assert "no element 'e999'" in bad[0].content
        assert "bad arguments for type" in bad[1].content
        o = await step(env, "navigate", url="/search?category=Kitchen")
        o = await step(env, "select", element=element(o.content, "select", "Sort by"), option="Cheapest first")
        assert o.error and "no option 'Cheapest first'" in o.content
        o = await step(env, "read")  # still usable
        assert not o.error and "Camp Mug" in o.content
    finally:
        await env.close()


async def test_observations_are_bounded_and_paged(pack_dir):
    env, obs = await open_shop(pack_dir, max_chars=300, start_url="/search")
    try:
        assert len(obs.content) <= 300
        match = re.search(r"call read with offset=(\d+)", obs.content)
        assert match, obs.content
        rest = await step(env, "read", offset=int(match.group(1)))
        assert len(rest.content) <= 300 and rest.content.startswith("URL: /search")
        assert rest.content.split("---\n", 1)[1] not in obs.content
        scoped = await step(env, "read", element="table")
        assert "Summit 40L Backpack" in scoped.content and "Search products" not in scoped.content
    finally:
        await env.close()


async def test_page_url_and_app_db_checkers(pack_dir):
    env, obs = await open_shop(pack_dir, start_url="/order/1001")
    try:
        o = await step(env, "click", element=element(obs.content, "button", "Cancel order"))
        assert "Dialog: confirm 'Cancel this order?' (accepted)" in o.content
        verdicts = [
            await PageChecker(selector="#status", text="CANCELLED").check(env, TRAJ),
            await PageChecker(regex=r"order #100[1]").check(env, TRAJ),
            await PageChecker(selector="#cancel-order", absent=True).check(env, TRAJ),
            await PageChecker(selector="nav a", count=6).check(env, TRAJ),
            await UrlChecker(path="/order/1001", contains="msg=").check(env, TRAJ),
            AppDbChecker("SELECT status FROM orders WHERE id = 1001", "cancelled").check(env, TRAJ),
            AppDbChecker("SELECT id FROM orders WHERE status != 'cancelled'", [[1003], [1002]],
                         ordered=False).check(env, TRAJ),
        ]
        assert [v.passed for v in verdicts] == [True] * len(verdicts), [v.detail for v in verdicts]
        failing = [
            await PageChecker(selector="#status", text="placed").check(env, TRAJ),
            await PageChecker(selector="#status", text="cancelled", case_sensitive=True, absent=True).check(env, TRAJ),
            await PageChecker(selector="nav a", count=5).check(env, TRAJ),
            await UrlChecker(equals="/order/1001").check(env, TRAJ),
            AppDbChecker("SELECT status FROM orders WHERE id = 1002", "cancelled").check(env, TRAJ),
            AppDbChecker("SELECT id FROM orders WHERE status != 'cancelled'", [[1003], [1002]]).check(env, TRAJ),
        ]
        assert [v.passed for v in failing] == [False] * len(failing)
        assert "'delivered'" in failing[4].detail
    finally:
        await env.close()
    with pytest.raises(ValueError):
        UrlChecker()


async def test_each_episode_gets_a_fresh_world(pack_dir):
    first, obs = await open_shop(pack_dir, start_url="/product/KT-MUG")
    try:
        await step(first, "click", element="#add-to-cart")
        second, obs2 = await open_shop(pack_dir, start_url="/cart")
        try:
            assert "Your cart is empty." in obs2.content  # no shared cookies, no shared database
            assert first.base_url != second.base_url and first.db_path != second.db_path
        finally:
            await second.close()
        assert AppDbChecker("SELECT count(*) FROM cart_items", 1).check(first, TRAJ).passed
    finally:
        await first.close()


def _browser_main_pids(procs) -> list[int]:
    pids = []
    for pid, _ in procs.tagged():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fp:
                argv = fp.read().split(b"\0")
        except OSError:
            continue
        cmd = b" ".join(argv)  # Chromium rewrites its children's command lines into argv[0]
        if (argv[0].endswith(b"/chromium") or argv[0].endswith(b"chrome")) and b"--type=" not in cmd:
            pids.append(pid)
    return pids


async def test_crashed_page_fails_the_episode(pack_dir):
    env, obs = await open_shop(pack_dir)
    try:
        refused = await step(env, "navigate", url="chrome://crash")  # the agent cannot crash it this way
        assert refused.error and "chrome: URLs are refused" in refused.content and not env.crashed

        async def crash():  # a renderer crash from outside (what an out-of-memory page does)
            try:
                await env._page.goto("chrome://crash", timeout=5000)
            except Exception:
                pass

        await env._on_browser(crash(), 10)
        for _ in range(50):
            if env.crashed:
                break
            await asyncio.sleep(0.05)
        with pytest.raises(BrowserCrashed, match="crashed"):
            await step(env, "read")
        with pytest.raises(RuntimeError, match="browser failed"):
            AppDbChecker("SELECT 1", 1).check(env, TRAJ)
    finally:
        await env.close()


async def test_killed_browser_fails_the_episode_and_the_next_one_gets_a_new_browser(pack_dir, procs):
    launcher.shutdown()
    env, obs = await open_shop(pack_dir)
    try:
        pids = _browser_main_pids(procs)
        assert len(pids) == 1
        os.kill(pids[0], signal.SIGKILL)
        await asyncio.sleep(0.3)
        with pytest.raises(BrowserCrashed, match="disconnected"):
            await step(env, "read")
    finally:
        await env.close()
    env, obs = await open_shop(pack_dir)
    try:
        assert "Trailhead Outfitters" in obs.content
        assert launcher.stats()["launches"] == 2
    finally:
        await env.close()


async def test_shared_browser_is_reused_then_closed_with_its_run(pack_dir, procs, tmp_path):
    launcher.shutdown()
    assert procs.wait_gone() == []
    run = SimpleNamespace(run_id="run-a", run_dir=tmp_path)
    envs = [BrowserEnvironment(app="app.py", db="seed.sql", base_dir=pack_dir, run=run) for _ in range(3)]
    await asyncio.gather(*(e.reset(i) for i, e in enumerate(envs)))  # concurrent episodes, one launch
    await step(envs[0], "screenshot")
    for e in envs:
        await e.close()
    again = BrowserEnvironment(app="app.py", db="seed.sql", base_dir=pack_dir, run=run)
    await again.reset(9)
    await again.close()
    assert launcher.stats() == {"launches": 1, "shared_open": 1, "driver_running": 1}
    assert len(list((tmp_path / "screenshots").glob("*.png"))) == 1
    assert procs.tagged() != []
    assert launcher.release_run("run-a") == 1
    assert launcher.stats()["shared_open"] == 0 and launcher.stats()["driver_running"] == 0
    assert procs.wait_gone() == []


async def test_browser_per_episode_when_not_shared(pack_dir, procs):
    launcher.shutdown()
    for _ in range(2):
        env, obs = await open_shop(pack_dir, shared_browser=False)
        assert "Trailhead Outfitters" in obs.content
        await env.close()
    assert launcher.stats()["launches"] == 2 and launcher.stats()["shared_open"] == 0
    launcher.shutdown()
    assert procs.wait_gone() == []


def test_finding_chromium(monkeypatch, tmp_path):
    monkeypatch.setenv(launcher.ENV_VAR, str(tmp_path / "nope"))
    with pytest.raises(launcher.BrowserUnavailable, match=launcher.ENV_VAR):
        launcher.find_chromium()
    fake = tmp_path / "my-chrome"
    fake.write_text("#!/bin/sh\n")
    assert launcher.find_chromium(str(fake)) == str(fake)  # the parameter wins over the variable
    monkeypatch.setenv(launcher.ENV_VAR, str(fake))
    assert launcher.find_chromium() == str(fake)
    with pytest.raises(ValueError, match="action_timeout"):
        BrowserEnvironment(action_timeout=0)

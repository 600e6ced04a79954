"""What a checker reads, and the limits on what an agent can do (real Chromium, real app servers).

Where an attack needs script in the page (DOM edits, history.pushState), the test runs that script
through Playwright itself: the agent's tools cannot, and the checkers must hold even if they could.
"""

from __future__ import annotations

import textwrap

import pytest

from agentsynth_browser import BrowserEnvironment, launcher
from agentsynth_browser.checkers import AppDbChecker, PageChecker, UrlChecker
from agentsynth_browser.exploits import CANARY
from agentsynth_browser.server import db_bytes
from agentsynth_kernel import ToolCall, Trajectory, load_pack
from agentsynth_kernel.testing.adversarial import Exploit, run_exploits

TRAJ = Trajectory("t", "x")


async def step(env, tool, **arguments):
    return await env.step(ToolCall(tool, arguments))


async def open_shop(pack_dir, **params):
    env = BrowserEnvironment(app="app.py", db="seed.sql", base_dir=pack_dir, **params)
    return env, await env.reset(7)


async def in_page(env, script):
    """Run script in the agent's page: what an agent with a JavaScript tool could do."""

    async def run():
        return await env._page.evaluate(script)

    return await env._on_browser(run(), 10)


def notes_app(folder, extra: str = "") -> None:
    (folder / "schema.sql").write_text("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL);")
    (folder / "app.py").write_text(textwrap.dedent("""
        import threading
        from agentsynth_browser.webapp import App, html_page, redirect

        def make_app(db_path):
            app = App(db_path)
            seen = {"slow": 0}
            stuck = threading.Event()

            @app.route("/")
            def home(req):
                n = req.db.execute("SELECT count(*) FROM notes").fetchone()[0]
                return html_page("Notes", f"<h1 id=count>{n} notes</h1><form method=post action=/add>"
                                          "<input id=text name=text aria-label=Note><button id=add>Add</button></form>"
                                          f"<a id=out href='http://127.0.0.1:{CANARY}/'>elsewhere</a>"
                                          "<a id=jump href='/jump'>jump</a>")

            @app.route("/add", methods=("POST",))
            def add(req):
                req.db.execute("INSERT INTO notes (text) VALUES (?)", (req.form["text"],))
                return redirect("/")

            @app.route("/jump")
            def jump(req):
                return redirect(f"http://127.0.0.1:{CANARY}/jumped")

            @app.route("/slow")
            def slow(req):  # answers the agent once, then hangs (a page that hangs when checked)
                seen["slow"] += 1
                if seen["slow"] > 1:
                    stuck.wait(60)
                return html_page("Slow", "<p id=done>done</p>")

            @app.route("/ok")
            def ok(req):
                return html_page("Ok", "<p id=done>done</p>")

            return app
    """).replace("{CANARY}", str(CANARY.port)) + extra)


# --- navigation: only the site, only http(s) ---------------------------------------------------


async def test_navigation_off_the_site_is_refused_and_reaches_nothing(pack_dir):
    env, obs = await open_shop(pack_dir)
    port = CANARY.port
    try:
        for url in ("file:///etc/passwd", "FILE:///etc/passwd", "javascript:document.body.innerHTML='x'",
                    " JavaScript:alert(1)", "java\tscript:alert(1)", "data:text/html,<p id=thanks>Thank you</p>",
                    "chrome://version", "view-source:/", "about:config", "blob:null/x", "ws://127.0.0.1:1/",
                    f"http://127.0.0.1:{port}/", f"http://localhost:{port}/", f"//127.0.0.1:{port}/x",
                    f"http://[::1]:{port}/", "https://example.com/"):
            o = await step(env, "navigate", url=url)
            assert o.error and "refused" in o.content, (url, o.content)
            assert "root:" not in o.content
            assert env.relative_url() == "/", url  # still on the shop's home page
        assert CANARY.check() is None
        ok = await step(env, "navigate", url=env.base_url + "/cart")  # the site itself, absolute: fine
        assert not ok.error and ok.content.startswith("URL: /cart")
    finally:
        await env.close()


async def test_links_and_redirects_off_the_site_are_blocked(tmp_path):
    notes_app(tmp_path)
    env = BrowserEnvironment(app="app.py", db="schema.sql", base_dir=tmp_path)
    await env.reset(0)
    try:
        o = await step(env, "click", element="#out")
        assert o.error and "refused" in o.content or "blocked" in o.content, o.content
        await step(env, "navigate", url="/")
        o = await step(env, "click", element="#jump")
        assert o.error and ("blocked" in o.content or "refused" in o.content), o.content
        assert CANARY.check() is None
    finally:
        await env.close()


# --- page and url checkers read the server, not the agent's page -------------------------------


async def test_page_checker_re_loads_the_page_from_the_app(pack_dir):
    env, obs = await open_shop(pack_dir)
    try:
        await step(env, "type", element="#q", text="faked by typing")
        live = await in_page(env, "document.querySelector('#q').value")
        assert live == "faked by typing"  # the agent's page holds the typed value ...
        verdict = await PageChecker(selector="#q", text="faked").check(env, TRAJ)
        assert not verdict.passed and "re-loaded" in verdict.detail  # ... the checker does not see it
        await in_page(env, "document.body.innerHTML = \"<p id='thanks'>Thank you for your order!</p>\"")
        assert not (await PageChecker(selector="#thanks").check(env, TRAJ)).passed
        assert (await PageChecker(selector="h2", text="Welcome to the trail").check(env, TRAJ)).passed
    finally:
        await env.close()


async def test_url_checker_needs_a_url_the_app_served(pack_dir):
    env, obs = await open_shop(pack_dir)
    try:
        await step(env, "navigate", url="/order/1001#/order/confirmed")
        assert not (await UrlChecker(contains="confirmed").check(env, TRAJ)).passed  # the fragment is not read
        assert (await UrlChecker(equals="/order/1001").check(env, TRAJ)).passed
        await in_page(env, "history.pushState({}, '', '/order/1004?new=1')")  # a URL made up in the page
        url = await UrlChecker(regex=r"^/order/1004").check(env, TRAJ)
        assert not url.passed and "not served" in url.detail
        page = await PageChecker(selector="#thanks").check(env, TRAJ)
        assert not page.passed and "HTTP 404" in page.detail
    finally:
        await env.close()


# --- checks under a time budget ----------------------------------------------------------------


async def test_a_runaway_checker_query_fails_within_the_check_budget(pack_dir):
    env, obs = await open_shop(pack_dir, check_timeout=0.5)
    try:
        forever = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
        verdict = AppDbChecker(forever, 1).check(env, TRAJ)
        assert not verdict.passed and "check budget of 0.5s" in verdict.detail
        assert AppDbChecker("SELECT count(*) FROM orders", 3).check(env, TRAJ).passed
        with pytest.raises(ValueError, match="check_timeout"):
            BrowserEnvironment(check_timeout=0)
    finally:
        await env.close()


def test_a_page_that_hangs_when_checked_fails_its_episode_and_the_run_goes_on(tmp_path):
    notes_app(tmp_path)
    (tmp_path / "pack.yaml").write_text(textwrap.dedent("""
        id: hangs
        environment: {type: browser, app: app.py, db: schema.sql, check_timeout: 1}
        tasks:
          - {id: slow, instruction: Open /slow., checkers: [{type: page, selector: '#done'}]}
          - {id: ok, instruction: Open /ok., checkers: [{type: page, selector: '#done'}]}
    """))
    pack = load_pack(tmp_path)
    go = Exploit("go", "open the task's page", lambda state, pack: [
        {"tool": "navigate", "arguments": {"url": "/" + state.task.id}}, {"answer": "done"}])
    try:
        outcomes = {o.task_id: o for o in run_exploits(pack, [go], timeout=30)}
    finally:
        launcher.shutdown()  # played outside a run: no run_finished closes the shared browser
    assert outcomes["slow"].status == "failed" and "did not serve '/slow' again within 1s" in outcomes["slow"].detail
    assert outcomes["ok"].status == "passed"


# --- bounded sizes -------------------------------------------------------------------------------


async def test_inputs_and_observations_are_bounded(pack_dir):
    env, obs = await open_shop(pack_dir, max_chars=500, max_screenshots=1)
    try:
        cases = [
            (await step(env, "type", element="#q", text="x" * 10_001), "at most 10000 can be typed"),
            (await step(env, "navigate", url="/search?q=" + "A" * 5000), "at most 4096 are accepted"),
            (await step(env, "click", element="#" + "b" * 2000), "at most 1000 are accepted"),
            (await step(env, "press", key="K" * 100), "'key' must be a key name"),
        ]
        for o, why in cases:
            assert o.error and why in o.content and len(o.content) <= 500, o.content
            assert len(o.data["url"]) <= 4096
        assert not (await step(env, "screenshot")).error
        assert "screenshot limit" in (await step(env, "screenshot")).content
    finally:
        await env.close()


async def test_request_bodies_are_capped_before_the_app(pack_dir):
    env, obs = await open_shop(pack_dir, max_body_bytes=2048, start_url="/support")
    try:
        await step(env, "type", element="#email", text="dana@example.com")
        await step(env, "select", element="#topic", option="Damaged item")
        await step(env, "type", element="#message", text="é" * 10_000)  # 60 KB once form-encoded
        o = await step(env, "click", element="#send")
        assert o.error and "Payload Too Large" in o.content and "byte request body (limit 2048)" in o.content
        assert AppDbChecker("SELECT count(*) FROM tickets", 0).check(env, TRAJ).passed
    finally:
        await env.close()


async def test_the_app_database_stops_growing_at_its_cap(tmp_path):
    notes_app(tmp_path)
    cap = 64 * 1024
    env = BrowserEnvironment(app="app.py", db="schema.sql", base_dir=tmp_path, max_db_bytes=cap)
    await env.reset(0)
    try:
        refused = None
        for i in range(60):
            o = await step(env, "type", element="#text", text=f"{i} " + "n" * 8000, submit=True)
            if o.error:
                refused = (i, o.content)
                break
        assert refused is not None, "the database never filled up"
        assert "database is full (limit 65536 bytes)" in refused[1] and "Insufficient Storage" in refused[1]
        size = db_bytes(env.db_path)
        await step(env, "navigate", url="/")
        assert "full" in (await step(env, "type", element="#text", text="more", submit=True)).content
        assert db_bytes(env.db_path) == size <= cap + 16 * 1024  # at most one request past the cap
    finally:
        await env.close()


async def test_a_huge_page_gives_a_bounded_snapshot(tmp_path):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "index.html").write_text("<title>big</title>" + "".join(f"<p>line {i}</p>" for i in range(6000)))
    env = BrowserEnvironment(static="site", base_dir=tmp_path)
    await env.reset(0)
    try:
        o = await step(env, "read", offset=4999)
        assert "line 4999" in o.content and "longer than 5000 lines" in o.content
        assert "line 5000" not in o.content
    finally:
        await env.close()


async def test_the_page_checker_does_not_run_the_pages_scripts(tmp_path):
    """A script the agent stored in an app without escaping (an injection) runs in the agent's page,
    not in the page the checker reads (unless the pack sets check_scripts: true)."""
    notes_app(tmp_path, extra=textwrap.dedent("""
        def make_app_unsafe(db_path):
            app = make_app(db_path)

            @app.route("/wall")
            def wall(req):  # renders notes without escaping
                notes = "".join(r[0] for r in req.db.execute("SELECT text FROM notes"))
                return html_page("Wall", f"<main>{notes}</main>")

            return app
    """))
    script = "<p id=note>hi</p><script>document.body.innerHTML = '<p id=thanks>Thank you for your order</p>'</script>"
    for check_scripts, fooled in ((False, False), (True, True)):
        env = BrowserEnvironment(app="app.py:make_app_unsafe", db="schema.sql", base_dir=tmp_path,
                                 check_scripts=check_scripts)
        await env.reset(0)
        try:
            await step(env, "type", element="#text", text=script, submit=True)
            o = await step(env, "navigate", url="/wall")
            assert "Thank you for your order" in o.content  # the injection ran in the agent's page
            assert (await PageChecker(selector="#thanks").check(env, TRAJ)).passed is fooled
            # the server's HTML, as served: the note is there unless the script rewrote the page
            assert (await PageChecker(selector="#note", text="hi").check(env, TRAJ)).passed is not fooled
        finally:
            await env.close()

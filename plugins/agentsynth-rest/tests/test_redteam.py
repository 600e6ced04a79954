"""Red-team attempts beyond test_hostile.py, each a hole that was open and is now closed (or an
attempt that held): the world's own app on 127.0.0.1 (real uvicorn), the agent's calls as tool
calls, the checkers as the kernel runs them. Every attempt must end as an error observation or a
failed verdict: never a pass, never an exception (an exception leaves the episode unscored, a
zero an RL policy could choose), never unbounded memory, never a secret's characters on disk."""

from __future__ import annotations

import json
import sqlite3
import tracemalloc

import pytest

from agentsynth_kernel import ToolCall, Trajectory, get_host
from conftest import TICKETS, rest_env

SECRET = "s3cr3t-value-0123456789"
TRAJ = Trajectory("t", "x")


def checker(name, **params):
    return get_host().get("checker", name).factory(**params)


@pytest.fixture
async def red(monkeypatch):
    monkeypatch.setenv("REDTEAM_KEY", SECRET)
    env = rest_env(app="hostile.py:create_app", openapi="redteam.yaml", call_seconds=5, max_response_bytes=512,
                   headers={"X-Tenant": "acme"}, auth=[{"env": "REDTEAM_KEY", "header": "X-Api-Key"}])
    await env.reset(0)
    yield env
    await env.close()


# --- decoding: bombs that went around the capped inflater -------------------------------------------


async def test_stacked_encodings_are_not_inflated(red):
    """Was: 'gzip, gzip' (or any two layers) went to httpx's decoders, which inflate a chunk whole:
    ~300 bytes on the wire held 200 MB. Now refused before a byte is inflated."""
    tracemalloc.start()
    obs = await red.step(ToolCall("doubleGzip", {}))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert obs.error and "encoded as 'gzip, gzip'" in obs.content and "one layer of gzip or deflate" in obs.content
    assert peak < 5_000_000
    verdict = await checker("http", path="/gzip2", json_path="$", exists=True).check(red, TRAJ)
    assert not verdict.passed


@pytest.mark.parametrize("encoding", ["br", "zstd", "gzip, br", "compress"])
async def test_an_encoding_the_client_did_not_ask_for_is_refused(red, encoding):
    """br / zstd are inflated whole by httpx when their packages are installed (another plugin may
    install them): the client asks for gzip and deflate only, and takes nothing else."""
    obs = await red.step(ToolCall("encoded", {"as": encoding}))
    assert obs.error and f"encoded as {encoding!r}" in obs.content


async def test_an_unknown_encoding_token_is_passed_through_raw(red):
    # what httpx does too: a server's 'utf-8' is not a compression, and its bytes are read as sent
    obs = await red.step(ToolCall("encoded", {"as": "utf-8"}))
    assert not obs.error and obs.data["json"] == {"value": 1}


# --- answers and arguments that crashed the episode -----------------------------------------------


async def test_json_nested_past_pythons_limit_is_not_json_and_fails_no_episode(red):
    """Was: json.loads raised RecursionError out of step() and out of the http checker."""
    obs = await red.step(ToolCall("deep", {}))
    assert obs.data == {"status": 200}  # read (cut at the cap), not parsed
    big = rest_env(app="hostile.py:create_app", openapi="redteam.yaml", max_response_bytes=1_000_000)
    await big.reset(0)
    try:
        obs = await big.step(ToolCall("deep", {}))
        assert not obs.error and "json" not in obs.data  # 400 KB, whole: still not parsed
        verdict = await checker("http", path="/deep", json_path="$", exists=True).check(big, TRAJ)
        assert not verdict.passed and "not (complete) JSON" in verdict.detail
    finally:
        await big.close()


async def test_a_stored_value_nested_near_the_limit_fails_the_check_without_raising(red):
    """The agent stores the deepest value the client still encodes; the checker reads it back
    (deeper in the stack) and compares, shows and matches it without a RecursionError."""
    deepest = None
    for depth in (2000, 990, 950, 900, 800, 600):
        value: list = []
        node = value
        for _ in range(depth):
            node.append([])
            node = node[0]
        obs = await red.step(ToolCall("putValue", {"key": "k", "body": value}))
        if not obs.error:
            deepest = depth
            break
        assert "nested too deeply" in obs.content
    assert deepest is not None
    for params in ({"equals": [1]}, {"matches": "x"}, {"contains": [[1]]}, {"equals": [[[]]]}):
        verdict = await checker("http", path="/store/k", json_path="$", **params).check(red, TRAJ)
        assert not verdict.passed, params


WIRE = [
    ("echo", {"X-Tenant": "a", "q": "\ud800"}, "unknown argument"),  # X-Tenant is the world's (below)
    ("echo", {"q": "\ud800"}, "q: not valid Unicode text"),
    ("echo", {"X-Trace": "caf\u00e9"}, "X-Trace: a header value must be printable ASCII"),
    ("echo", {"X-Trace": "\ud800"}, "X-Trace: not valid Unicode text"),
    ("echo", {"note": "\ud800"}, "the JSON body: not valid Unicode text"),
    ("echo", {"note": float("nan")}, "the JSON body: Out of range float values are not JSON compliant"),
    ("echo", {"note": [float("inf")]}, "the JSON body: Out of range float values"),
    ("echo", {"x": float("inf")}, "x: expected a finite number"),
    ("echo", {"x": "NaN"}, "x: expected a finite number"),
    ("echo", {"x": "\u0661"}, "x: expected a finite number"),  # float() reads Arabic-Indic digits
    ("echo", {"n": [float("-inf")]}, "n: expected a finite number"),
    ("echo", {"n": list(range(100_000))}, "the URL (path and query) is"),
    ("echo", {"q": "q" * 40_000}, "the URL (path and query) is"),
    ("getItem", {"item_id": "\u0664\u0662"}, "item_id: expected an integer"),  # '٤٢' matched \d
    ("getItem", {"item_id": "1" * 50_000}, "the URL (path and query) is"),
    ("increment", {"by": 10**5000}, "the JSON body: Exceeds the limit"),
]


@pytest.mark.parametrize(("tool", "args", "problem"), WIRE, ids=[f"{t}-{p[:24]}" for t, _, p in WIRE])
async def test_arguments_the_wire_cannot_carry_are_error_observations(red, tool, args, problem):
    """Was: a lone surrogate in a query, any non-ASCII header value, a path or query past httpx's
    URL limit raised (UnicodeEncodeError, httpx.InvalidURL) out of step(); NaN and Infinity went
    out as non-JSON a server may read as anything. Each is now this call's error, sent nowhere."""
    obs = await red.step(ToolCall(tool, args))
    assert obs.error and problem in obs.content, obs.content
    assert not (red.world / "echo.json").exists()  # nothing reached the app


async def test_arguments_that_are_not_json_are_an_error_observation(red):
    obs = await red.step(ToolCall("echo", {"note": b"bytes"}))  # a scripted policy's own Python object
    assert obs.error and "the arguments are not JSON" in obs.content


async def test_deeply_nested_arguments_are_an_error_observation(red):
    value: list = []
    node = value
    for _ in range(5000):
        node.append([])
        node = node[0]
    obs = await red.step(ToolCall("echo", {"note": value}))
    assert obs.error and "nested too deeply" in obs.content


# --- headers the world owns -------------------------------------------------------------------------


async def test_a_header_the_world_sets_is_never_an_argument(red):
    """Was: a document's header parameter named like the world's credential (X-Api-Key) or fixed
    header (X-Tenant) was a tool argument, and the agent's value replaced the world's on the wire."""
    echo = next(t for t in red.tools() if t.name == "echo")
    props = echo.parameters["properties"]
    assert "X-Api-Key" not in props and "X-Tenant" not in props and "X-Tenant" not in echo.parameters.get(
        "required", [])
    # headers that reroute a request in some frameworks, or re-encode its answer, are never the agent's
    assert "X-Original-URL" not in props and "Accept-Encoding" not in props and "X-Trace" in props
    obs = await red.step(ToolCall("echo", {"X-Api-Key": "forged", "X-Tenant": "evil"}))
    assert obs.error and "unknown argument(s) 'X-Api-Key', 'X-Tenant'" in obs.content
    obs = await red.step(ToolCall("echo", {"X-Trace": "t"}))
    arrived = json.loads((red.world / "echo.json").read_text())
    assert arrived["x-tenant"] == "acme" and arrived["x-api-key"] == SECRET and arrived["x-trace"] == "t"
    assert arrived["accept-encoding"] == "gzip, deflate"
    assert SECRET not in obs.content and "<redacted>" in obs.content


# --- credentials ---------------------------------------------------------------------------------


async def test_a_credential_cut_by_the_cap_shows_none_of_its_characters(red):
    """Was: the cap (max_response_bytes) could fall inside the echoed credential, whose first
    characters were shown and stored; padding the body moved the cut to show every prefix, so the
    whole key leaked a character at a time. The last bytes that could hold a secret's start are
    now dropped from a cut answer, whatever they are."""
    shown = set()
    for n in range(0, 520, 3):
        obs = await red.step(ToolCall("echo", {"note": "p" * n}))
        body = obs.content.split("\n\n", 1)[-1]
        assert SECRET not in obs.content
        for k in range(3, len(SECRET)):
            if SECRET[:k] in body:
                shown.add(k)
    assert shown == set()


@pytest.mark.parametrize(("body", "kept"), [
    (b"x" * 20 + b"SECRET12"[:5], b"x" * 18),  # a cut secret's start: dropped with what may hold it
    (b"x" * 30, b"x" * 23),  # the same bytes whatever they hold: no oracle for a guessed prefix
    (b"x" * 10 + b"SECRET12" + b"yyyyy", b"x" * 10 + b"SECRET12"),  # a whole one across the line: kept, masked
    (b"x" * 10 + b"SECRET12" + b"SECRET12"[:4], b"x" * 10 + b"SECRET12"),
    (b"ab", b""),
])
def test_a_cut_answer_loses_exactly_the_bytes_that_could_start_a_secret(body, kept):
    from agentsynth_rest.env import _without_cut_secret

    assert _without_cut_secret(body, [b"SECRET12", b"SEC%2212"]) == kept


async def test_a_credential_is_masked_in_its_json_escaped_and_url_encoded_forms(monkeypatch):
    key = 'k3y"w\\rd/0123456789'  # JSON escapes the quote and the backslash, a query the slash
    monkeypatch.setenv("REDTEAM_KEY", key)
    env = rest_env(app="hostile.py:create_app", openapi="hostile.yaml",
                   auth=[{"env": "REDTEAM_KEY", "prefix": "", "header": "X-Trace-Id"}])
    await env.reset(0)
    try:
        # the echo serves the headers JSON-escaped
        obs = await env.step(ToolCall("echo", {"q": key}))  # the query comes back URL-encoded
        escaped, quoted = json.dumps(key)[1:-1], "k3y%22w%5Crd%2F0123456789"
        assert escaped in (env.world / "echo.json").read_text()  # really on the wire, escaped
        for form in (key, escaped, quoted, "0123456789"):
            assert form not in obs.content, form
            assert form not in json.dumps(obs.data, ensure_ascii=False), form
    finally:
        await env.close()


# --- the rest_db checker: what the world's file can do to it ------------------------------------


async def test_rest_db_fails_and_never_raises_on_a_file_the_app_broke(red):
    """Was: any sqlite error raised out of the checker (the episode unscored): a file the agent had
    the app overwrite, a lock held by an app's open transaction, a symlink out of the world."""
    await red.step(ToolCall("putValue", {"key": "k", "body": {"rows": 1}}))  # the app writes store.json
    verdict = checker("rest_db", db="store.json", query="SELECT count(*) FROM sqlite_master", equals=0).check(red, TRAJ)
    assert not verdict.passed and "not a database" in verdict.detail
    db = red.world / "app.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.execute("BEGIN EXCLUSIVE")  # an app in the middle of a write, never finishing
    try:
        verdict = checker("rest_db", query="SELECT count(*) FROM t", equals=0, check_seconds=0.3).check(red, TRAJ)
        assert not verdict.passed and ("locked" in verdict.detail or "ran past 0.3 s" in verdict.detail)
    finally:
        conn.rollback()
        conn.close()
    assert checker("rest_db", query="SELECT count(*) FROM t", equals=0).check(red, TRAJ).passed
    outside = red.world.parent / "outside.db"
    sqlite3.connect(outside).close()
    db.unlink()
    db.symlink_to(outside)  # stands in for an app that makes links in its directory
    verdict = checker("rest_db", query="SELECT 1", equals=1).check(red, TRAJ)
    assert not verdict.passed and "outside the world's state directory" in verdict.detail
    sqlite3.connect(red.world / "other.db").close()  # an app that dropped its table: the pack's query no longer runs
    verdict = checker("rest_db", db="other.db", query="SELECT count(*) FROM no_such_table", equals=0).check(red, TRAJ)
    assert not verdict.passed and "no such table" in verdict.detail


async def test_a_number_past_a_floats_range_fails_a_tolerant_check_without_raising(red):
    """Was: JSON integers have no limit; 4,000 digits stored through the API made a check with a
    tolerance raise OverflowError (math.isclose converts to float): the episode went unscored."""
    huge = 10**3999
    assert not (await red.step(ToolCall("putValue", {"key": "price", "body": {"price": huge}}))).error
    for expected, passed in ((5, False), (huge, True), (huge + 1, True), (huge + 2, False)):
        verdict = await checker("http", path="/store/price", json_path="$.price", equals=expected,
                                tolerance=1.5).check(red, TRAJ)
        assert verdict.passed is passed, (expected, verdict.detail)


@pytest.mark.parametrize("db", ["../x.db", "/etc/passwd", "a/../../x.db", "..\\x.db", ""])
def test_rest_db_names_a_file_inside_the_world(db):
    with pytest.raises(ValueError, match="db: expected a file name inside the world's directory"):
        checker("rest_db", db=db, query="SELECT 1", equals=1)


async def test_the_in_process_server_bounds_a_request_body_whoever_sends_it(red):
    """The docstring promised a 413 past MAX_BODY; nothing enforced it. A local process (not the
    agent's client, which max_request_bytes bounds) posting 9 MB is refused before the app reads."""
    import httpx

    from agentsynth_rest import server

    # valid JSON (trailing blanks are allowed): an app that read it all would add 5
    padded = b'{"by": 5}' + b" " * server.MAX_BODY

    async def chunks():
        for start in range(0, len(padded), 1_000_000):
            yield padded[start:start + 1_000_000]

    statuses = []
    async with httpx.AsyncClient(trust_env=False, timeout=30) as client:
        for content in (padded, chunks()):  # with a Content-Length, then chunked without one
            try:
                statuses.append((await client.post(f"{red.base_url}/counter/increment", content=content)).status_code)
            except httpx.HTTPError:  # the server answered 413 and closed while the client still wrote
                statuses.append(None)
    assert all(s in (413, None) for s in statuses) and 413 in statuses, statuses
    assert json.loads((red.world / "counter.json").read_text()) == {"counter": 0}
    assert not (await red.step(ToolCall("getCounter", {}))).error


# --- the tickets app -------------------------------------------------------------------------------


async def test_the_tickets_app_takes_ascii_ids_and_whole_tags_only():
    """Past the client's own checks (a raw request): the app's \\d took '٤' (as ticket 4), and its
    tag pattern, matched with $, took 'bug\\n'."""
    import httpx

    env = rest_env(base_dir=TICKETS, app="app.py:create_app")
    await env.reset(0)
    try:
        async with httpx.AsyncClient(trust_env=False) as client:
            assert (await client.get(f"{env.base_url}/tickets/\u0664")).status_code == 422
            assert (await client.put(f"{env.base_url}/tickets/4/tags/bug%0A")).status_code == 422
            assert (await client.put(f"{env.base_url}/tickets/4/tags/bug")).status_code == 200
    finally:
        await env.close()


def test_the_task_done_right_plus_renamed_titles_fails_every_task():
    """Was: the snapshots saw each ticket's status, priority and assignee, its tags and comments,
    but not its title: the oracle's work plus every title renamed passed all eight tasks. The
    'untouched' check (the tickets table against the app's seed_tickets) now fails each one."""
    import asyncio

    import attrs

    from agentsynth_kernel import ComponentSpec, EpisodeConfig, load_pack, run_episode
    from agentsynth_rest.exploits import rest_exploits

    exploit = next(e for e in rest_exploits() if e.name == "rest.oracle_plus_collateral")
    pack = load_pack("tickets")

    def play(task):
        script = lambda state: exploit.actions(state, pack)  # noqa: E731
        config = EpisodeConfig(ComponentSpec("scripted", {"actions": script}), max_steps=30, timeout=60)
        return run_episode(get_host(), pack, task, 0, 0, config)

    async def every(tasks):
        return await asyncio.gather(*(play(t) for t in tasks))

    results = asyncio.run(every(pack.tasks))
    for task, result in zip(pack.tasks, results, strict=True):
        assert result.status == "failed", (task.id, result.status, result.why)
        failed = {v.checker for v in result.verdicts if not v.passed}
        # the task itself was done right (file-outage's new ticket was renamed too: its own check fails)
        assert failed == ({"untouched", "rest_db"} if task.id == "file-outage" else {"untouched"}), (task.id, failed)
    # without that check, the same play passes: the hole it closes
    lax = [attrs.evolve(t, checkers=[c for c in t.checkers if c.params.get("name") != "untouched"])
           for t in pack.tasks[:2]]
    assert [r.status for r in asyncio.run(every(lax))] == ["passed", "passed"]


async def test_a_request_left_in_a_blocked_server_never_reaches_the_next_episodes_world():
    """Was: an app that blocks its loop after answering (sync work after the reply) had no request
    in flight, so its server went back to the warm pool; a call the agent made meanwhile sat in
    the socket, and when the loop woke it was dispatched to the NEXT episode's app (its counter
    moved before that episode began). A server is pooled only when its loop answers at once."""
    import asyncio

    first = rest_env(app="hostile.py:create_app", openapi="redteam.yaml", call_seconds=0.5)
    await first.reset(0)
    assert not (await first.step(ToolCall("blockAfter", {"s": 1.5}))).error
    obs = await first.step(ToolCall("increment", {"by": 100}))  # waits in the socket of a blocked loop
    assert obs.error and "no complete answer" in obs.content
    slot = first._slot
    await first.close()
    second = rest_env(app="hostile.py:create_app", openapi="redteam.yaml")
    await second.reset(7)
    try:
        assert second._slot is not slot
        await asyncio.sleep(2.0)  # the old loop wakes and handles what it was sent
        assert json.loads((second.world / "counter.json").read_text()) == {"counter": 7}
        assert (await second.step(ToolCall("getCounter", {}))).data["json"]["value"] == 7
    finally:
        await second.close()


async def test_one_comment_cannot_spell_two_in_the_comment_snapshot():
    """Was: the comments snapshot joined ticket:author:body with ' | ', and a body is free text: one
    comment on ticket 5 with the body 'Seen again | 7:helpdesk:Also here' read exactly as two
    comments (on 5 and on 7). Author and body are now quoted (SQL quote(): a quote inside is
    doubled), so no body can spell another comment, whatever quotes it carries."""
    import yaml

    query = yaml.safe_load((TICKETS / "pack.yaml").read_text())["metadata"]["snapshot_queries"][3]
    old = "SELECT group_concat(ticket_id || ':' || author || ':' || body, ' | ') FROM (SELECT * FROM comments ORDER BY id)"

    async def snapshots(comments):
        env = rest_env(base_dir=TICKETS, app="app.py:create_app")
        await env.reset(0)
        try:
            for ticket, body in comments:
                obs = await env.step(ToolCall("addComment", {"ticket_id": ticket, "author": "helpdesk", "body": body}))
                assert not obs.error, obs.content
            conn = sqlite3.connect(env.state_path("tickets.db"))
            try:
                return conn.execute(old).fetchone()[0], conn.execute(query).fetchone()[0]
            finally:
                conn.close()
        finally:
            await env.close()

    real = await snapshots([(5, "Seen again"), (7, "Also here")])
    assert (await snapshots([(5, "Seen again | 7:helpdesk:Also here")]))[0] == real[0]  # the hole
    for body in ("Seen again | 7:helpdesk:Also here", "Seen again' | 7:'helpdesk':'Also here"):
        assert (await snapshots([(5, body)]))[1] != real[1], body


# --- attempts that held (kept as tests, so they keep holding) --------------------------------------


def _endless_headers_server():
    """A raw TCP server (not ASGI: no framework would send this) answering every request with a
    status line and then header lines, forever, until the client hangs up."""
    import socket
    import threading

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(4)
    sent = [0]

    def serve():
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            try:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\n")
                line = b"X-H: " + b"v" * 1000 + b"\r\n"
                while sent[0] < 200_000_000:
                    conn.sendall(line)
                    sent[0] += len(line)
            except OSError:
                pass
            finally:
                conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return sock, sent


async def test_endless_response_headers_are_bounded_by_the_client():
    sock, sent = _endless_headers_server()
    env = rest_env(base_url=f"http://127.0.0.1:{sock.getsockname()[1]}", openapi="redteam.yaml", call_seconds=5)
    await env.reset(0)
    try:
        tracemalloc.start()
        obs = await env.step(ToolCall("getCounter", {}))
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert obs.error and "Receive buffer too long" in obs.content and obs.data == {"status": None}
        assert peak < 5_000_000 and sent[0] < 50_000_000  # h11 gave up at its buffer limit and hung up
    finally:
        await env.close()
        sock.close()


async def test_big_response_headers_from_the_app_are_an_error_observation(red):
    obs = await red.step(ToolCall("bigHeaders", {}))
    assert obs.error and "Receive buffer too long" in obs.content
    assert not (await red.step(ToolCall("getCounter", {}))).error


async def test_query_values_cannot_add_parameters_or_a_fragment(red):
    await red.step(ToolCall("echo", {"q": "x&admin=1#f", "n": [1, 2]}))
    arrived = (red.world / "echo.json").read_text()
    obs = await red.step(ToolCall("echo", {"q": "x&admin=1#f"}))
    assert obs.data["json"]["query"] == "q=x%26admin%3D1%23f" and arrived


async def test_the_checker_reads_the_world_with_its_own_client_and_the_worlds_headers(red):
    """A value the agent stores cannot redirect or re-credential the checker's request: it sends
    the world's tenant and key, whatever the agent did to its own client."""
    await red.step(ToolCall("putValue", {"key": "k", "body": {"status": "closed"}}))
    red.client.headers["x-tenant"] = "evil"  # even the agent's own client, tampered with
    verdict = await checker("http", method="POST", path="/echo", json_path="$.headers['x-tenant']",
                            equals="acme").check(red, TRAJ)
    assert verdict.passed, verdict.detail


# --- what the world serves while it starts, and an app that prints ---------------------------------


async def test_a_document_or_a_reset_answer_is_read_capped_like_any_answer(external):
    """Was: the document (GET openapi URL) and the reset hook's answer were read whole by httpx:
    a gzip bomb served as the document was inflated whole (50 MB)."""
    from agentsynth_rest.openapi import OpenAPIError
    from agentsynth_rest.server import WorldStartError

    warm = rest_env(base_url=external.url, openapi=f"{external.url}/openapi.yaml")
    await warm.reset(0)  # what the first world of a process imports is not counted below
    await warm.close()
    env = rest_env(base_url=external.url, openapi=f"{external.url}/gzip", max_check_bytes=1_000_000)
    tracemalloc.start()
    with pytest.raises(OpenAPIError, match=r"/gzip is longer than 1,000,000 bytes \(max_check_bytes\)"):
        await env.reset(0)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    await env.close()
    assert peak < 8_000_000
    env = rest_env(base_url=external.url, openapi="redteam.yaml",
                   reset={"path": "/huge", "method": "GET", "expect_status": [204]})
    tracemalloc.start()
    with pytest.raises(WorldStartError, match="reset: GET /huge answered 200: AAAA"):
        await env.reset(0)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    await env.close()
    assert peak < 8_000_000  # 100 MB offered


async def test_the_document_cache_is_bounded(external):
    """Was: one parsed document kept per distinct answer, forever: an API serving a new document
    every episode grew the process without end over a long run."""
    from agentsynth_rest import env as rest

    for seed in range(rest.MAX_DOCUMENTS + 8):
        env = rest_env(base_url=external.url, openapi=f"{external.url}/openapi-varying.json")
        await env.reset(seed)
        assert [t.name for t in env.tools()] == ["getCounter"]
        await env.close()
    assert len(rest._doc_cache) <= rest.MAX_DOCUMENTS


@pytest.mark.parametrize("app", ["hostile.py:create_app", "hostile.py:noisy_app"])
async def test_an_app_that_prints_does_not_hang_its_subprocess_server(app):
    """Was: after the handshake nobody read the child's stdout / stderr pipes: an app printing
    400 KB per call filled them and blocked in print(), its server with it; and a factory that
    printed before the server listened had its line taken for the handshake (the world did not
    start). The app's output goes to stderr, read from the start."""
    env = rest_env(app=app, openapi="redteam.yaml", server="subprocess", call_seconds=5)
    await env.reset(0)
    try:
        for _ in range(4):
            obs = await env.step(ToolCall("chatty", {}))
            assert not obs.error, obs.content
    finally:
        await env.close()


@pytest.mark.parametrize("tool", ["stall", "drip", "blockAfter"])
async def test_a_server_left_with_a_stuck_handler_ends_its_thread(tool):
    """Was: a server dropped from the pool with a handler still running (a long poll, an endless
    stream) was told should_exit, and uvicorn's shutdown then waited for that handler forever:
    its thread, loop and port lived on, one per such episode, for the life of the process."""
    import asyncio

    env = rest_env(app="hostile.py:create_app", openapi="hostile.yaml" if tool != "blockAfter" else "redteam.yaml",
                   call_seconds=0.5)
    await env.reset(0)
    obs = await env.step(ToolCall(tool, {"s": 3.0} if tool == "blockAfter" else {}))
    if tool == "blockAfter":
        obs = await env.step(ToolCall("getCounter", {}))  # waits behind the blocked loop
    assert obs.error and "no complete answer" in obs.content
    slot = env._slot
    await env.close()
    for _ in range(80):
        if not slot.thread.is_alive():
            break
        await asyncio.sleep(0.1)
    assert not slot.thread.is_alive() and slot.sock.fileno() == -1


def test_no_rest_exploit_leaves_an_episode_unscored():
    """The kit counts an error as 'not farmed'; for an RL policy an unscored episode is a reward
    it zeroed at will (the kernel change asked for in the report makes the kit say so). Every rest
    exploit, rest.unscorable first, must end as a failed episode, never an error."""
    from agentsynth_kernel import load_pack
    from agentsynth_kernel.testing.adversarial import run_exploits
    from agentsynth_rest.exploits import rest_exploits

    pack = load_pack("tickets")
    outcomes = run_exploits(pack, rest_exploits(), tasks=["close-duplicate", "file-outage"], concurrency=2,
                            timeout=60, max_steps=60)
    assert len(outcomes) == 2 * len(rest_exploits())
    assert [o.describe() for o in outcomes if o.status != "failed"] == []


async def test_two_episodes_in_one_external_api_at_once_are_refused(external):
    """Was: concurrent episodes of a run shared an external API's state: eight samples of one task
    at once, one did the work and seven passed doing nothing (or a reset undid another's work).
    The second is now an environment error that says why; after the first closes it starts."""
    from agentsynth_rest.server import WorldStartError

    first = rest_env(base_url=external.url, openapi="hostile.yaml")
    second = rest_env(base_url=external.url + "/", openapi="hostile.yaml")
    await first.reset(0)
    try:
        with pytest.raises(WorldStartError, match="is in use by another episode of this run.*concurrency: 1"):
            await second.reset(0)
        await second.close()
        await first.reset(1)  # the same world again: its own claim
    finally:
        await first.close()
    await second.reset(0)
    await second.close()
    shared = [rest_env(base_url=external.url, openapi="hostile.yaml", shared=True) for _ in range(2)]
    for env in shared:  # episodes that cannot interfere (a read-only API) say so
        await env.reset(0)
    for env in shared:
        await env.close()
    stray = rest_env(base_url=external.url, openapi="hostile.yaml")
    await stray.reset(0)
    del stray  # a world dropped without close holds nothing
    third = rest_env(base_url=external.url, openapi="hostile.yaml")
    await third.reset(0)
    await third.close()


@pytest.mark.parametrize("value", ["", "//", "%2e%2e", "%2F", "ADMIN", "\uff0e\uff0e", ";admin", "1?x", "1#x"])
async def test_path_tricks_stay_one_encoded_segment(value):
    """Held: empty and slash values are refused; everything else is one percent-encoded segment the
    server decodes once (a fullwidth '．．' or '%2e%2e' never becomes '..', ';' never a parameter)."""
    echo = rest_env(app="hostile.py:create_app", openapi="hostile.yaml")
    await echo.reset(0)
    try:
        obs = await echo.step(ToolCall("getItem", {"item_id": value}))
        if value in ("", "//"):
            assert obs.error and "is not a path segment" in obs.content
        else:
            path = obs.data["json"]["path"]
            assert path == "/items/" + value and path.count("/") == 2, path
    finally:
        await echo.close()


async def test_rest_db_bounds_what_a_query_brings_back(red):
    """A world the agent filled cannot take the checker's memory: past 100,000 rows, or one value
    past 64 MB (a group_concat of everything), the check fails."""
    from agentsynth_rest import checkers

    conn = sqlite3.connect(red.world / "app.db")
    conn.execute("CREATE TABLE t AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 100001) "
                 "SELECT x FROM c")
    conn.commit()
    conn.close()
    verdict = checker("rest_db", query="SELECT x FROM t", equals=[]).check(red, TRAJ)
    assert not verdict.passed and f"more than {checkers.MAX_ROWS:,} rows" in verdict.detail
    verdict = checker("rest_db", query="SELECT count(*) FROM t", equals=100001).check(red, TRAJ)
    assert verdict.passed
    verdict = checker("rest_db", query="SELECT length(zeroblob(100000000))", equals=100000000).check(red, TRAJ)
    assert not verdict.passed and "too big" in verdict.detail


async def test_a_request_never_leaves_the_worlds_server_even_if_a_path_were_absolute(red):
    """Held (and now guarded): tool and checker paths start with '/' (the document's, the
    checker's), so httpx keeps them on the base URL; send() itself refuses any request whose
    origin is not the world's, so the world's credentials can never travel with one elsewhere."""
    from agentsynth_rest.exploits import canary

    before = canary().hits
    client = red.checker_client()
    try:
        obs = await red.send(client, "GET", f"{canary().url}/steal", [], {}, None)
        assert obs.error and "is not this world's server; the request was not sent" in obs.content
        obs = await red.send(client, "GET", f"//127.0.0.1:{canary().port}/steal", [], {}, None)
        assert obs.data["status"] == 404 and "no route /steal" in obs.content  # httpx keeps it on the base URL
    finally:
        await client.aclose()
    assert canary().hits == before

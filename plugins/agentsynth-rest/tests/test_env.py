"""The rest world over real HTTP: an app per episode (in-process warm pool and subprocess), an
external API with a reset hook, documents from files and loopback URLs, credentials from the
environment (masked), error statuses as error observations, worlds that cannot start."""

from __future__ import annotations

import asyncio
import json
import sqlite3

import pytest

from agentsynth_kernel import InvalidValue, ToolCall
from agentsynth_rest import server
from agentsynth_rest.openapi import OpenAPIError
from agentsynth_rest.server import WorldStartError
from conftest import TICKETS, WORLD, rest_env

SECRET = "s3cr3t-value-0123456789"


async def test_an_app_world_is_fresh_per_episode_and_its_calls_are_real_http():
    env = rest_env(base_dir=TICKETS, app="app.py:create_app", exclude_operations=["resetDatabase"])
    first = await env.reset(0)
    assert first.content.startswith("Helpdesk API: 11 operation(s) as tools.") and "resetDatabase" not in first.content
    assert "127.0.0.1" not in first.content  # the port changes per episode; observations must not
    world = env.world
    obs = await env.step(ToolCall("updateTicket", {"ticket_id": 4, "status": "closed"}))
    assert not obs.error and obs.content.startswith("HTTP 200 OK") and obs.data["json"]["status"] == "closed"
    db = sqlite3.connect(env.state_path("tickets.db"))
    assert db.execute("SELECT status FROM tickets WHERE id = 4").fetchone() == ("closed",)
    db.close()
    obs = await env.step(ToolCall("getTicket", {"ticket_id": 99}))
    assert obs.error and obs.content.startswith("HTTP 404 Not Found") and '"no ticket 99"' in obs.content
    obs = await env.step(ToolCall("createTicket", {"title": "t"}))  # missing required arguments: no request
    assert obs.error and "missing required argument(s) requester, team" in obs.content
    obs = await env.step(ToolCall("updateTicket", {"ticket_id": 1, "status": "gone"}))  # the server validates
    assert obs.error and obs.content.startswith("HTTP 422")
    await env.reset(1)
    assert env.world != world and not world.exists()  # the old world is gone, the new one is seeded afresh
    obs = await env.step(ToolCall("getTicket", {"ticket_id": 4}))
    assert obs.data["json"]["status"] == "open"
    await env.close()
    assert env.world is None


async def test_the_warm_pool_reuses_servers_and_a_released_world_answers_503():
    import httpx

    env = rest_env(base_dir=TICKETS, app="app.py:create_app")
    await env.reset(0)
    port, url = env._slot.port, env.base_url
    await env.close()
    assert server.pool_size() >= 1
    async with httpx.AsyncClient(trust_env=False) as client:  # a straggler of the old episode gets nothing
        response = await client.get(f"{url}/tickets/1")
    assert response.status_code == 503
    await env.reset(0)
    assert env._slot.port == port  # the same listening server, a new app
    await env.close()


async def test_a_server_whose_answer_was_delivered_goes_back_to_the_pool_while_its_handler_returns():
    """A request is in flight until answered in full, not until its handler returns: counted down
    at return, a client that already had its answer (a loaded machine delays the server thread)
    closed the world first, and the warm server was dropped as if its app were stuck."""
    env = rest_env(app="hostile.py:create_app", openapi="hostile.yaml")
    await env.reset(0)
    obs = await env.step(ToolCall("linger", {}))  # its handler sleeps 0.5 s after answering
    assert obs.data == {"status": 200, "json": {"value": 0}}
    slot = env._slot
    await env.close()
    assert slot in server._idle and not slot.server.should_exit
    await env.reset(0)
    assert env._slot is slot
    await env.close()


async def test_the_subprocess_server_mode_serves_the_same_app_with_its_arguments():
    env = rest_env(base_dir=TICKETS, app="app.py:create_app", server="subprocess", app_args={"id_offset": 100})
    await env.reset(0)
    proc = env._proc.proc
    obs = await env.step(ToolCall("listUsers", {"team": "database", "role": "lead"}))
    assert [(u["id"], u["name"]) for u in obs.data["json"]] == [(103, "Carol Diaz")]
    assert (await env.step(ToolCall("getTicket", {"ticket_id": 4}))).error
    await env.close()
    assert proc.poll() is not None  # killed with its process group


async def test_an_external_world_is_reset_by_its_hook_before_every_episode(external):
    env = rest_env(base_url=external.url, openapi=f"{external.url}/openapi.yaml",
                   reset={"path": "/reset", "body": {"start": "{seed}"}}, operations=["getCounter", "increment"])
    await env.reset(7)
    assert [(t.name, t.read_only) for t in env.tools()] == [("getCounter", True), ("increment", False)]  # GET, POST
    obs = await env.step(ToolCall("increment", {"by": 3}))
    assert obs.data == {"status": 201, "json": {"value": 10}}  # reset to the seed, 7, then 3 more
    await env.reset(2)
    obs = await env.step(ToolCall("getCounter", {}))
    assert obs.data["json"]["value"] == 2
    assert json.loads((external.world / "counter.json").read_text()) == {"counter": 2}
    await env.close()


async def test_credentials_come_from_the_environment_and_never_show(external, monkeypatch):
    monkeypatch.setenv("HOSTILE_KEY", SECRET)
    monkeypatch.setenv("HOSTILE_TOKEN", "tok-" + SECRET)
    env = rest_env(base_url=external.url, openapi="hostile.yaml", reset={"path": "/reset"},
                   auth=[{"env": "HOSTILE_KEY", "scheme": "key"}, {"env": "HOSTILE_TOKEN", "scheme": "bearer"}])
    await env.reset(0)
    assert json.loads((external.world / "reset.json").read_text())["x-api-key"] == SECRET  # the hook had them too
    assert "Authorization" not in json.dumps([t.parameters for t in env.tools()])
    obs = await env.step(ToolCall("echo", {"X-Trace": "abc", "q": "hi", "n": [1, 2], "body": {"note": SECRET}}))
    assert not obs.error
    arrived = json.loads((external.world / "echo.json").read_text())
    assert arrived["x-api-key"] == SECRET and arrived["authorization"] == f"Bearer tok-{SECRET}"
    headers = obs.data["json"]["headers"]
    assert headers["x-trace"] == "abc" and obs.data["json"]["query"] == "q=hi&n=1&n=2"
    # echoed back: masked in what the agent sees and in the structured data that is stored
    assert SECRET not in obs.content and "<redacted>" in obs.content and SECRET not in json.dumps(obs.data)
    assert headers["x-api-key"] == "<redacted>" and obs.data["json"]["body"] == '{"note": "<redacted>"}'
    from agentsynth_kernel import redact

    assert SECRET not in redact(f"x {SECRET} y")  # and remembered by the kernel's redaction of everything stored
    await env.close()


async def test_a_missing_credential_or_a_bad_target_is_refused_with_the_reason(external, monkeypatch):
    monkeypatch.delenv("NOT_SET_KEY", raising=False)
    env = rest_env(base_url=external.url, openapi="hostile.yaml", auth=[{"env": "NOT_SET_KEY", "header": "X-Api-Key"}])
    with pytest.raises(WorldStartError, match=r"auth\[0\].env: the environment variable NOT_SET_KEY is not set"):
        await env.reset(0)
    with pytest.raises(InvalidValue, match="is not on the loopback"):
        rest_env(base_url="http://10.0.0.1:8080", openapi="hostile.yaml")
    with pytest.raises(InvalidValue, match="a document URL must be on the loopback"):
        rest_env(base_url=external.url, openapi="http://example.com/openapi.json")
    with pytest.raises(InvalidValue, match="exactly one of 'app'"):
        rest_env(openapi="hostile.yaml")
    for name in ("Authorization", "X-Api-Key", "X-Auth-Token", "Host"):  # a credential written in the spec
        with pytest.raises(InvalidValue, match=f"headers.{name}: not a header a world may set"):
            rest_env(base_url=external.url, openapi="hostile.yaml", headers={name: "abc"})
    env = rest_env(base_url=external.url, openapi="hostile.yaml", reset={"path": "/teapot", "method": "GET"})
    with pytest.raises(WorldStartError, match="reset: GET /teapot answered 418"):
        await env.reset(0)
    await env.close()
    env = rest_env(base_url=external.url, openapi="nope.yaml")
    with pytest.raises(OpenAPIError, match="nope.yaml: No such file"):
        await env.reset(0)
    await env.close()


async def test_app_errors_are_error_observations_and_the_server_survives():
    env = rest_env(app="hostile.py:create_app", openapi="hostile.yaml")
    await env.reset(0)
    obs = await env.step(ToolCall("boom", {}))
    assert obs.error and obs.content.startswith("HTTP 500") and "RuntimeError" in obs.content
    obs = await env.step(ToolCall("get_teapot", {}))
    assert obs.error and obs.content.startswith("HTTP 418")
    obs = await env.step(ToolCall("getCounter", {}))
    assert not obs.error and obs.data["json"]["value"] == 0
    assert (await env.step(ToolCall("nope", {}))).error
    obs = await env.step(ToolCall("increment", {"by": 1, "extra": 2}))
    assert obs.error and "unknown argument(s) 'extra'" in obs.content
    await env.close()


def test_a_world_that_fails_to_start_is_an_environment_error_with_its_reason(tmp_path):
    from agentsynth_kernel import ComponentSpec, EpisodeConfig, get_host, load_pack, run_episode

    (tmp_path / "pack.yaml").write_text(
        "id: broken\nenvironment: {type: rest, app: world/hostile.py:failing_app, openapi: world/hostile.yaml}\n"
        "tasks:\n  - id: t\n    instruction: x\n    checkers: [{type: http, path: /counter, status: 200}]\n")
    (tmp_path / "world").symlink_to(WORLD)
    pack = load_pack(tmp_path)
    config = EpisodeConfig(ComponentSpec("noop"), max_steps=3, timeout=30)
    result = asyncio.run(run_episode(get_host(), pack, pack.tasks[0], 0, 0, config))
    assert result.status == "error" and result.error_kind == "environment"
    assert "the app factory failed: RuntimeError: database seed file missing" in result.error


async def test_a_subprocess_app_that_dies_at_start_is_a_start_error_with_its_stderr():
    env = rest_env(app="hostile.py:failing_app", openapi="hostile.yaml", server="subprocess")
    with pytest.raises(WorldStartError, match="database seed file missing"):
        await env.reset(0)
    await env.close()


@pytest.mark.parametrize("environment, message", [
    ("{type: rest, app: a.py:f, server: threads}", "environment: server: expected one of thread, subprocess, got 'threads'"),
    ("{type: rest, app: a.py:f, call_seconds: -1}", "environment: call_seconds: expected > 0 and <= 600, got -1"),
    ("{type: rest, app: a.py:f, max_response_bytes: 10}", "environment: max_response_bytes: expected >= 256"),
    ("{type: rest, app: a.py:f, auth: [{header: X-Key}]}", "environment.auth[0].env: missing required key"),
    ("{type: rest, app: a.py:f, opeanpi: x.yaml}", "environment.opeanpi: unknown key (did you mean 'openapi'?)"),
    ("{type: rest, app: a.py:f, reset: {method: GET}}", "environment.reset.path: missing required key"),
])
def test_a_bad_world_spec_is_a_path_qualified_error(tmp_path, environment, message):
    from agentsynth_kernel import SpecError, load_pack

    (tmp_path / "pack.yaml").write_text(f"id: bad\nenvironment: {environment}\ntasks:\n  - id: t\n    instruction: x\n"
                                        "    checkers: [{type: http, path: /a, status: 200}]\n")
    with pytest.raises(SpecError) as info:
        load_pack(tmp_path)
    text = "\n".join(info.value.messages)
    assert message in text, text
    assert str(tmp_path / "pack.yaml") in str(info.value)


def test_a_subprocess_app_dies_with_the_agentsynth_process_that_started_it(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    code = ("import sys, time; from pathlib import Path; from agentsynth_rest import server\n"
            f"s = server.Subprocess('hostile.py:create_app', Path({str(WORLD)!r}), Path({str(tmp_path)!r}), 0, 30)\n"
            "print(s.proc.pid, flush=True); time.sleep(120)")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    os.kill(parent.pid, signal.SIGKILL)  # no close, no atexit: the parent is just gone
    parent.wait()

    def alive(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/status") as f:
                return "\nState:\tZ" not in f.read()
        except FileNotFoundError:
            return False

    deadline = time.monotonic() + 10
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(child)

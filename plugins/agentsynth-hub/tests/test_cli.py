"""The commands' own errors: clear, path-qualified, never a traceback, never exit 0."""

from __future__ import annotations

import json

import pytest


def test_submit_without_a_token(cli, runs, hub):
    r = cli("hub", "submit", str(runs["oracle"]), "--url", hub.url, env={"AGENTSYNTH_HUB_TOKEN": ""})
    assert r.returncode != 0 and "AGENTSYNTH_HUB_TOKEN is not set" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize(("make", "message"), [
    (lambda tmp: tmp / "missing", "not an agentsynth run directory (does not exist)"),
    (lambda tmp: (tmp / "empty").mkdir() or tmp / "empty", "not an agentsynth run directory (has no run.sqlite)"),
])
def test_submit_something_that_is_not_a_run(cli, hub, tmp_path, make, message):
    r = cli("hub", "submit", str(make(tmp_path)), "--url", hub.url, env={"AGENTSYNTH_HUB_TOKEN": "x"})
    assert r.returncode != 0 and message in r.stderr and "Traceback" not in r.stderr


def test_submit_to_nothing(cli, runs):
    r = cli("hub", "submit", str(runs["oracle"]), "--url", "http://127.0.0.1:9", env={"AGENTSYNTH_HUB_TOKEN": "x"})
    assert r.returncode != 0 and "http://127.0.0.1:9/api/submissions: ConnectError" in r.stderr
    assert "Traceback" not in r.stderr


def test_a_refusal_through_the_command_exits_1_with_the_reason(cli, runs, hub):
    r = cli("hub", "submit", str(runs["only"]), "--url", hub.url, env={"AGENTSYNTH_HUB_TOKEN": hub.tokens["bob"]})
    assert r.returncode == 1
    assert "refused: spec: the run played only some tasks (only: update-email)" in r.stderr and "(HTTP 422)" in r.stderr


def test_token_commands(cli, tmp_path):
    db = str(tmp_path / "t.sqlite")
    made = cli("hub", "token", "create", "carol", "--db", db)
    assert made.returncode == 0 and made.stdout.startswith("ash_") and "not shown again" in made.stderr
    again = cli("hub", "token", "create", "carol", "--db", db)
    assert again.returncode != 0 and "token name 'carol' is already taken" in again.stderr
    listed = cli("hub", "token", "list", "--db", db)
    assert listed.stdout.strip() == "carol" and made.stdout.strip() not in listed.stdout
    assert cli("hub", "token", "revoke", "carol", "--db", db).returncode == 0
    assert cli("hub", "token", "list", "--db", db).stdout.strip() == "carol  (revoked)"
    gone = cli("hub", "token", "revoke", "nobody", "--db", db)
    assert gone.returncode != 0 and "no token named 'nobody'" in gone.stderr


def test_pack_add_of_an_unknown_pack(cli, tmp_path):
    r = cli("hub", "pack", "add", "no-such-pack", "--db", str(tmp_path / "p.sqlite"))
    assert r.returncode != 0 and "no-such-pack: no such pack" in r.stderr and "Traceback" not in r.stderr


def test_pull_gets_the_stored_pack_with_its_hash(cli, hub, tmp_path):
    import httpx

    versions = httpx.get(hub.url + "/api/packs/core").json()["versions"]
    r = cli("hub", "pull", "core", "--url", hub.url, "-o", str(tmp_path / "core"))
    assert r.returncode == 0, r.stderr
    assert f"pulled core {versions[-1]['content_hash']}" in r.stdout
    assert (tmp_path / "core" / "pack.yaml").is_file() and (tmp_path / "core" / "oracle.py").is_file()
    # the pulled copy is a pack the kernel runs
    b = cli("bench", "--pack", str(tmp_path / "core"), "--policy", "oracle", "--only", "update-email", "--json", "-")
    assert b.returncode == 0 and json.loads(b.stdout[b.stdout.index("{"):])["counts"]["passed"] == 1
    missing = cli("hub", "pull", "nope", "--url", hub.url, "-o", str(tmp_path / "nope"))
    assert missing.returncode != 0 and "pack 'nope' is not on this hub" in missing.stderr


def test_serve_on_a_busy_port(cli, hub, tmp_path):
    port = hub.url.rsplit(":", 1)[1]
    r = cli("hub", "serve", "--db", str(tmp_path / "b.sqlite"), "--port", port, timeout=60)
    assert r.returncode != 0 and f"cannot listen on 127.0.0.1:{port}" in r.stderr and "Traceback" not in r.stderr


def test_resolving_a_pack_through_the_hub(hub, tmp_path):
    """What `--hub URL` would do for a pack name that is not installed (the kernel hook requested)."""
    from agentsynth_hub.remote import resolve_remote_pack
    from agentsynth_kernel import load_pack

    path = resolve_remote_pack("core", hub.url, cache=tmp_path / "cache")
    assert path is not None and path.name == "core" and (path / "pack.yaml").is_file()
    assert load_pack(path).content_hash == load_pack("core").content_hash
    assert path.parent.name == load_pack("core").content_hash.replace(":", "-")
    assert resolve_remote_pack("core", hub.url, cache=tmp_path / "cache") == path  # cached by hash
    assert resolve_remote_pack("no-such-pack", hub.url, cache=tmp_path / "cache") is None

"""The tie rule, the replay sample, the database (SQLite; PostgreSQL when a server can be started)."""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import time

import pytest

from agentsynth_hub.db import HubDB, hash_token
from agentsynth_hub.server import boards, leaderboard
from agentsynth_hub.verify import choose_sample


def entry(n, passed, episodes, split="test", content_hash="sha256:a"):
    return {"id": n, "submitter": "s", "label": f"e{n}", "run_id": str(n), "run_hash": "h", "content_hash": content_hash,
            "episodes": episodes, "passed": passed, "received_at": 0.0,
            "details": {"provenance": {"split": split, "trials": 1}, "verification": {"replayed": 3}}}


def test_overlapping_intervals_share_the_leaders_rank():
    rows = leaderboard([entry(1, 40, 100), entry(2, 45, 100), entry(3, 20, 100), entry(4, 35, 100)])
    ranks = {r["label"]: (r["rank"], r["tied"]) for r in rows}
    # leader 45/100: CI [0.355, 0.549]; 40/100: [0.309, 0.498] overlaps; 35/100: [0.264, 0.447] overlaps;
    # 20/100: [0.133, 0.289] does not -> its position, 4
    assert ranks == {"e2": (1, True), "e1": (1, True), "e4": (1, True), "e3": (4, False)}
    assert [r["label"] for r in rows] == ["e2", "e1", "e4", "e3"]


def test_a_clear_leader_is_not_tied():
    rows = leaderboard([entry(1, 95, 100), entry(2, 50, 100)])
    assert [(r["rank"], r["tied"]) for r in rows] == [(1, False), (2, False)]
    assert rows[0]["ci95"] == [0.8882, 0.9785]


def test_boards_keep_pack_versions_and_splits_apart():
    out = boards([entry(1, 9, 10), entry(2, 1, 10, split="train"), entry(3, 5, 10, content_hash="sha256:b")])
    assert [(b["content_hash"], b["split"], [e["submission"] for e in b["entries"]]) for b in out] == [
        ("sha256:b", "test", [3]), ("sha256:a", "train", [2]), ("sha256:a", "test", [1])]


def test_the_sample_takes_passed_episodes_first():
    from agentsynth_kernel import EpisodeResult, Trajectory

    def ep(task, status):
        return EpisodeResult(task_id=task, trial=0, seed=0, status=status, trajectory=Trajectory(task_id=task, instruction="x"))

    eps = [ep(f"f{i}", "failed") for i in range(10)] + [ep(f"p{i}", "passed") for i in range(3)] + [
        EpisodeResult(task_id="e", trial=0, seed=0, status="error")]
    chosen = choose_sample(eps, 5, random.Random(1))
    assert {e.task_id for e in chosen[:3]} == {"p0", "p1", "p2"}
    assert len(chosen) == 5 and all(e.status == "failed" for e in chosen[3:])
    assert all(e.task_id != "e" for e in choose_sample(eps, 100, random.Random(1)))


def exercise(db: HubDB) -> None:
    token = db.create_token("alice")
    assert token.startswith("ash_") and len(token) > 40
    assert db.submitter(token) == "alice" and db.submitter(token + "x") is None
    with pytest.raises(Exception, match="already taken"):
        db.create_token("alice")
    with pytest.raises(Exception, match="use 1-100 letters"):
        db.create_token("alice; drop table tokens")
    assert db.add_pack("p", "sha256:1", "1", "desc", b"\x1f\x8b archive") is True
    assert db.add_pack("p", "sha256:1", "1", "desc", b"other") is False  # a version is stored once
    assert db.pack_archive("p", "sha256:1") == b"\x1f\x8b archive"
    n = db.add_submission(submitter="alice", status="accepted", pack_id="p", content_hash="sha256:1", run_id="r",
                          run_hash="h", label="x", episodes=10, passed=7, details={"provenance": {"split": "all"}})
    db.add_submission(submitter="alice", status="refused", reason="summary: no")
    assert db.submission(n)["details"] == {"provenance": {"split": "all"}}
    assert [e["id"] for e in db.accepted("p")] == [n]
    assert db.already_accepted("r", "h") == n and db.already_accepted("r", "other") is None
    count, _ = db.recent_submissions("alice", time.time() - 60)
    assert count == 2
    assert db.revoke_token("alice") and db.submitter(token) is None
    assert [t["name"] for t in db.list_tokens()] == ["alice"]


def test_sqlite_stores_token_hashes_only(tmp_path):
    db = HubDB(str(tmp_path / "hub.sqlite"))
    exercise(db)
    token = db.create_token("bob")
    db.close()
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    assert token.encode() not in raw and hash_token(token).encode() in raw


def test_a_database_that_cannot_be_opened_is_a_clear_error(tmp_path):
    with pytest.raises(Exception, match=r"hub database postgresql\+psycopg://u:\*\*\*@127.0.0.1:9/hub"):
        HubDB("postgresql+psycopg://u:secret@127.0.0.1:9/hub")


@pytest.fixture(scope="module")
def postgres(tmp_path_factory):
    """A throw-away PostgreSQL cluster (skipped when the server binaries are not installed)."""
    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    if not (initdb and pg_ctl):
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) not installed: the PostgreSQL path is untested here")
    import tempfile
    from pathlib import Path

    # not under pytest's tmp dir: that is private to the user running pytest (0700), the server may be another
    root = Path(tempfile.mkdtemp(prefix="hub-pg-"))
    data = root / "data"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    import getpass
    import os

    user = getpass.getuser()
    env = dict(os.environ)
    run_as: list[str] = []
    if os.geteuid() == 0:  # postgres refuses to run as root: use an unprivileged account if there is one
        import pwd

        try:
            pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root without a 'postgres' account: cannot start a PostgreSQL server")
        run_as, user = ["runuser", "-u", "postgres", "--"], "postgres"
        shutil.chown(root, "postgres")
    subprocess.run([*run_as, initdb, "-D", str(data), "-A", "trust", "-U", user], check=True, capture_output=True,
                   env=env)
    subprocess.run([*run_as, pg_ctl, "-D", str(data), "-o", f"-p {port} -k {root} -h 127.0.0.1", "-l",
                    str(root / "log"), "-w", "start"], check=True, capture_output=True, env=env)
    yield f"postgresql+psycopg://{user}@127.0.0.1:{port}/postgres"
    subprocess.run([*run_as, pg_ctl, "-D", str(data), "-m", "immediate", "stop"], capture_output=True, env=env)
    shutil.rmtree(root, ignore_errors=True)


def test_postgresql(postgres):
    db = HubDB(postgres)
    exercise(db)
    db.close()



def test_a_hub_on_postgresql_accepts_and_ranks(postgres, runs, cli, hub_class, tmp_path):
    """The whole path on PostgreSQL: the server process, a submission replayed, the leaderboard."""
    import json

    import httpx
    import sqlalchemy as sa

    engine = sa.create_engine(postgres, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text("CREATE DATABASE hub_server"))
    engine.dispose()
    server = hub_class(tmp_path, "--sample", "3", db=postgres.rsplit("/", 1)[0] + "/hub_server")
    try:
        run = cli("hub", "submit", str(runs["oracle"]), "--url", server.url, "--json",
                  env={"AGENTSYNTH_HUB_TOKEN": server.tokens["alice"]})
        assert run.returncode == 0, (run.stdout[-2000:], run.stderr[-2000:])
        assert json.loads(run.stdout)["replayed"] == 3
        board = httpx.get(server.url + "/api/packs/core/leaderboard").json()
        assert [(e["passed"], e["rank"]) for e in board["boards"][0]["entries"]] == [(22, 1)]
        bad = cli("hub", "submit", str(runs["oracle"]), "--url", server.url,
                  env={"AGENTSYNTH_HUB_TOKEN": server.tokens["revoked"]})
        assert bad.returncode == 1 and "missing or invalid token" in bad.stderr
    finally:
        server.stop()



def test_a_hostile_label_is_text_on_the_page(hub):
    """Labels, names and descriptions are not the hub's own: the page escapes them (the real server, a
    board of its own written straight into the hub's database)."""
    import httpx

    db = HubDB(hub.db)
    db.add_pack("evil", "sha256:" + "1" * 64, "1", "<b>desc</b>", b"")
    db.add_submission(submitter="eve", status="accepted", pack_id="evil", content_hash="sha256:" + "1" * 64,
                      run_id="r", run_hash="h", label="<script>alert(1)</script>", episodes=4, passed=2,
                      details={"provenance": {"split": "<img src=x onerror=alert(2)>"}})
    db.close()
    page = httpx.get(hub.url + "/packs/evil").text
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<img src=x" not in page and "<b>desc</b>" not in page
    assert "<script>" not in httpx.get(hub.url + "/packs/%3Cscript%3E").text

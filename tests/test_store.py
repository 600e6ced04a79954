"""The SQLite run store: round trips, reopening, corrupt and foreign files, secret redaction."""

from __future__ import annotations

import sqlite3

import pytest

from agentsynth_kernel import AgentsynthError, EpisodeResult, Trajectory, Verdict, to_json
from agentsynth_kernel.secrets import REDACTED, has_redacted, is_secret_key, redact
from agentsynth_kernel.store import STORE_FILE, RunStore


def result(task: str = "t1", trial: int = 0, seed: int = 7, status: str = "passed") -> EpisodeResult:
    return EpisodeResult(task, trial, seed, status, trajectory=Trajectory(task, "do it"),
                         verdicts=[Verdict("kv_equals", status == "passed", detail="x")])


def test_round_trip_and_reopen(tmp_path):
    store = RunStore(tmp_path / "run")
    store.set_meta("spec", {"trials": 2})
    store.put(result("b", 1))
    store.put(result("a", 0, status="failed"))
    store.put(result("a", 0))  # same key: replaced, not duplicated
    store.event("hello", n=1)
    store.close()

    store = RunStore(tmp_path / "run", create=False)
    assert store.count() == 2
    assert [(r.task_id, r.trial, r.status) for r in store.results()] == [("a", 0, "passed"), ("b", 1, "passed")]
    assert [r.task_id for r in store.results("b")] == ["b"]
    assert store.get_meta("spec") == {"trials": 2}
    assert store.get_meta("missing") is None
    assert store.counts() == {("passed", ""): 2}
    assert store.task_ids() == ["a", "b"]
    assert [(k, d) for _, k, d in store.events()] == [("hello", {"n": 1})]
    assert store.last_event("hello") == ("hello", {"n": 1})
    assert store.integrity() == "ok"
    store.close()


def test_transaction_is_all_or_nothing(tmp_path):
    store = RunStore(tmp_path)
    with pytest.raises(RuntimeError):
        with store.transaction():
            store.set_meta("run_id", "x")
            raise RuntimeError("killed half-way")
    assert store.get_meta("run_id") is None
    store.close()


def test_missing_run_dir_is_a_clear_error(tmp_path):
    with pytest.raises(AgentsynthError, match="not an agentsynth run directory \\(does not exist\\)"):
        RunStore(tmp_path / "nope", create=False)
    (tmp_path / "other").mkdir()
    with pytest.raises(AgentsynthError, match=f"has no {STORE_FILE}"):
        RunStore(tmp_path / "other", create=False)


def test_run_dir_that_is_a_file(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(AgentsynthError, match="run directory path is a file"):
        RunStore(tmp_path / "f")


def test_garbage_file_is_refused(tmp_path):
    (tmp_path / STORE_FILE).write_bytes(b"this is not sqlite at all, just some bytes" * 20)
    with pytest.raises(AgentsynthError, match="not a readable run store: file is not a database"):
        RunStore(tmp_path)


def test_foreign_sqlite_database_is_refused(tmp_path):
    db = sqlite3.connect(tmp_path / STORE_FILE)
    db.execute("CREATE TABLE users (id INTEGER)")
    db.commit()
    db.close()
    with pytest.raises(AgentsynthError, match="not an agentsynth run store \\(tables: users\\)"):
        RunStore(tmp_path)


def test_store_killed_while_being_created_opens_as_new(tmp_path):
    db = sqlite3.connect(tmp_path / STORE_FILE)
    db.execute("PRAGMA journal_mode=WAL")  # file exists, no tables yet
    db.close()
    store = RunStore(tmp_path)
    assert store.count() == 0 and store.get_meta("store_format") == 1
    store.close()


def test_newer_store_format_is_refused(tmp_path):
    store = RunStore(tmp_path)
    store.set_meta("store_format", 99)
    store.close()
    with pytest.raises(AgentsynthError, match="store format 99 is newer"):
        RunStore(tmp_path)


def test_corrupt_episode_row_names_the_episode(tmp_path):
    store = RunStore(tmp_path)
    store.put(result("t9", 3))
    store.db.execute("UPDATE episodes SET result = ?", (b'{"task_id": 5}',))
    with pytest.raises(AgentsynthError, match=r"episode \('t9', trial 3\) is corrupt"):
        list(store.results())
    store.db.execute("UPDATE episodes SET result = ?", (to_json(EpisodeResult("t9", 3, 7, "error")).replace(
        b'"error"', b'"error","error_kind":"x"'),))  # a record written before the kinds were closed
    with pytest.raises(AgentsynthError, match=r"episode \('t9', trial 3\) is corrupt: Invalid enum value 'x' - at `\$.error_kind`"):
        list(store.results())
    store.db.execute("UPDATE meta SET value = 'nope{' WHERE key = 'store_format'")
    with pytest.raises(AgentsynthError, match="meta 'store_format' is corrupt"):
        store.get_meta("store_format")
    store.close()


@pytest.mark.parametrize(
    "key", ["api_key", "OPENAI_API_KEY", "apiKey", "token", "access_token", "client_secret", "password",
            "Authorization", "x-api-key", "secret_key"],
)
def test_secret_keys(key):
    assert is_secret_key(key)
    assert redact({key: "hunter2"}) == {key: REDACTED}


@pytest.mark.parametrize("key", ["key", "max_tokens", "tokens", "value", "keys", "monkey", "api_key_env"])
def test_ordinary_keys_are_kept(key):
    assert not is_secret_key(key)
    assert redact({key: "a"}) == {key: "a"}


@pytest.mark.parametrize(
    "value",
    ["sk-proj-abcdefghijklmnop1234", "AKIAIOSFODNN7EXAMPLE", "ghp_" + "a" * 36, "Bearer abc.def-ghi"],
)
def test_secret_looking_values_are_redacted_anywhere(value):
    data = {"policy": {"headers": [f"X: {value}"], "model": "gpt"}, "n": 3}
    out = redact(data)
    assert value not in repr(out)
    assert out["policy"]["model"] == "gpt" and out["n"] == 3
    assert has_redacted(out) and not has_redacted(data)


def test_damage_deep_inside_the_file_is_a_clear_error(tmp_path):
    store = RunStore(tmp_path / "run")
    for trial in range(200):
        store.put(EpisodeResult("t", trial, 1, "passed", trajectory=Trajectory("t", "x" * 3000)))
    store.close()
    path = tmp_path / "run" / STORE_FILE
    data = bytearray(path.read_bytes())
    assert len(data) > 100 * 4096
    data[-4096 * 20: -4096 * 19] = b"A" * 4096  # one data page near the end: opening still works
    path.write_bytes(bytes(data))
    with pytest.raises(AgentsynthError, match="run.sqlite: the run store is damaged: database disk image is malformed"):
        store = RunStore(tmp_path / "run", create=False)
        try:
            list(store.results())
        finally:
            store.close()


def test_values_of_secret_environment_variables_are_redacted(monkeypatch):
    monkeypatch.setenv("MYCORP_API_KEY", "corp-7f3a9b2c11")
    monkeypatch.setenv("SHORT_TOKEN", "abc")  # too short to mask safely
    out = redact({"base_url": "https://x/?k=corp-7f3a9b2c11", "note": "abc", "api_key_env": "MYCORP_API_KEY"})
    assert out == {"base_url": f"https://x/?k={REDACTED}", "note": "abc", "api_key_env": "MYCORP_API_KEY"}


def test_quick_episodes_are_committed_in_batches_and_valuable_ones_at_once(tmp_path):
    import sqlite3

    from agentsynth_kernel.records import EpisodeResult, Usage
    from agentsynth_kernel.store import BATCH_SIZE, STORE_FILE, RunStore

    store = RunStore(tmp_path)
    other = sqlite3.connect(tmp_path / STORE_FILE)  # what a kill -9 would leave: only committed rows

    def committed() -> int:
        return other.execute("SELECT count(*) FROM episodes").fetchone()[0]

    quick = [EpisodeResult(task_id="t", trial=i, seed=i, status="passed", duration_s=0.001) for i in range(BATCH_SIZE)]
    for result in quick[:-1]:
        store.put(result, defer=True)
    assert committed() == 0 and store.unflushed == BATCH_SIZE - 1
    store.put(quick[-1], defer=True)  # the batch is full
    assert committed() == BATCH_SIZE and store.unflushed == 0
    store.put(EpisodeResult(task_id="u", trial=0, seed=0, status="passed", duration_s=0.001), defer=True)
    assert committed() == BATCH_SIZE
    paid = EpisodeResult(task_id="u", trial=1, seed=1, status="failed", duration_s=0.01,
                         usage=Usage(prompt_tokens=10, completion_tokens=2))
    store.put(paid, defer=True)  # an LLM episode is committed at once, with what waited before it
    assert committed() == BATCH_SIZE + 2
    store.put(EpisodeResult(task_id="v", trial=0, seed=0, status="passed", duration_s=0.001), defer=True)
    assert store.count() == BATCH_SIZE + 3  # reading sees (and commits) what is deferred
    store.put(EpisodeResult(task_id="w", trial=0, seed=0, status="passed", duration_s=0.001), defer=True)
    store.close()
    assert committed() == BATCH_SIZE + 4
    other.close()


def test_a_plugin_declaring_an_unknown_error_kind_loses_no_episode(host, write, tmp_path):
    """An exception that declares a kind the records do not know (``agentsynth_error_kind =
    "database"``) fails its episode with a kind that decodes; the run's results read back."""
    import asyncio

    from agentsynth_kernel import hookimpl
    from agentsynth_kernel.engine import execute
    from agentsynth_kernel.records import ERROR_KINDS
    from agentsynth_kernel.spec import load_run_spec

    class DatabaseDown(Exception):
        agentsynth_error_kind = "database"

    class Failing:
        def act(self, state):
            raise DatabaseDown("the agent's database is down")

    class Plugin:
        @hookimpl
        def register_policies(self, register):
            register("db_failing", Failing)

    host.add_plugin(Plugin(), "unknown-kind")
    path = write("spec.yaml", """
        environment: {type: kv}
        tasks: [{id: a, instruction: x, checkers: [{type: kv_equals, key: a, value: "1"}]}]
        policy: db_failing
        trials: 2
        """)
    spec, pack = load_run_spec(path, host=host)
    report = asyncio.run(execute(spec, pack, run_dir=tmp_path / "run", host=host))
    assert [r.status for r in report.results] == ["error", "error"]
    store = RunStore(tmp_path / "run", create=False)
    stored = list(store.results())
    store.close()
    assert len(stored) == 2 and all(r.error_kind in ERROR_KINDS for r in stored)
    # the kernel attributes it to the stage that raised it (or, failing that, names the unknown kind)
    assert all("database" in r.error for r in stored), [r.error for r in stored]


def test_constructing_a_result_with_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match=r"error_kind 'database' is not one of agent, budget, .*ErrorKind"):
        EpisodeResult("a", 0, 1, "error", error_kind="database")

"""No training export ever holds a secret the process knows, whatever the trajectory echoes back."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from agentsynth_export.exporters import EXPORTERS
from agentsynth_kernel import Answer, Observation, Step, ToolCall
from conftest import agentsynth, make_result, write_run

OPENAI_KEY = "sk-test-9fQ2xL7vN4mR8tK1pZ6wB3yH"
PLAIN_TOKEN = "Zq8W2nXv5Lr7Tb3Kc9Pd"  # no known key shape: only redaction by value can catch it
ODD_PASSWORD = 'pa"ss\\wo/rd!42'  # JSON escapes it, twice inside a JSON-string argument
SECRETS = (OPENAI_KEY, PLAIN_TOKEN, ODD_PASSWORD)


def leaky_results() -> list:
    """A passing and a failing trial of a task whose tool observation, arguments and answer echo the keys."""
    out = []
    for trial, passed in ((0, True), (1, False)):
        r = make_result("leak", trial, passed)
        steps = list(r.trajectory.steps)
        steps.insert(0, Step(ToolCall("get", {"key": f"{PLAIN_TOKEN} {ODD_PASSWORD}"}, f"k{trial}"),
                             Observation(f"env: OPENAI_API_KEY={OPENAI_KEY} TOKEN={PLAIN_TOKEN} PW={ODD_PASSWORD}"),
                             turn=0, thought=f"the key is {OPENAI_KEY}"))
        steps[-1] = Step(Answer(f"Done. Your key is {OPENAI_KEY}, token {PLAIN_TOKEN}, password {ODD_PASSWORD}"
                                if passed else f"failed, key {OPENAI_KEY}"), None, turn=3)
        r.trajectory.steps = steps
        r.trajectory.metadata["echo"] = {"api_key": OPENAI_KEY, "note": PLAIN_TOKEN}
        r.error = f"stderr mentioned {PLAIN_TOKEN}"
        out.append(r)
    return out


def output_text(path: Path) -> str:
    """Every byte of an export, plus its decoded values (Parquet pages are compressed)."""
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    parts = [p.read_bytes().decode("utf-8", "replace") for p in files]
    for p in files:
        if p.suffix == ".parquet":
            parts.append(json.dumps(pq.read_table(p).to_pylist(), default=str))
    if path.is_dir():
        import datasets

        parts.append(json.dumps(datasets.load_from_disk(str(path)).to_list(), default=str))
    return "\n".join(parts)


def assert_clean(text: str) -> None:
    for secret in SECRETS:
        for form in (secret, json.dumps(secret)[1:-1], json.dumps(json.dumps(secret)[1:-1])[1:-1]):
            assert form not in text, f"secret {secret!r} leaked as {form!r}"
    assert "<redacted>" in text


@pytest.fixture
def planted(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("MY_SERVICE_TOKEN", PLAIN_TOKEN)
    monkeypatch.setenv("LOGIN_PASSWORD", ODD_PASSWORD)


@pytest.mark.parametrize("fmt", sorted(EXPORTERS))
def test_no_format_writes_a_secret_the_process_knows(fmt, planted, tmp_path):
    cls = EXPORTERS[fmt][0]
    exporter = cls(filter="all") if fmt != "dpo" else cls()
    out = tmp_path / ("ds" if fmt == "hf" else f"out.{fmt}")
    assert exporter.export(leaky_results(), out) >= 1
    text = output_text(out)
    assert "Done. Your key is" in text or fmt == "dpo" and "failed, key" in text
    assert_clean(text)


def test_export_command_in_every_format_greps_clean(tmp_path):
    import os

    run = write_run(tmp_path / "run", leaky_results())
    env = {"OPENAI_API_KEY": OPENAI_KEY, "MY_SERVICE_TOKEN": PLAIN_TOKEN, "LOGIN_PASSWORD": ODD_PASSWORD}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the subprocess inherits them: the process exporting knows the keys
    try:
        for fmt in sorted(EXPORTERS):
            out = tmp_path / "out" / ("ds" if fmt == "hf" else f"x.{fmt}")
            args = ["export", str(run), "-f", fmt, "-o", str(out), "--json"]
            proc = agentsynth(*args, *(() if fmt == "dpo" else ("--filter", "all")))
            assert proc.returncode == 0, proc.stderr
            assert_clean(output_text(out))
            for secret in SECRETS:
                assert secret not in proc.stdout + proc.stderr
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_scrub_masks_by_key_and_after_escapes_keeps_schemas_and_inputs(planted):
    from collections import Counter

    from agentsynth_export.scrub import scrub_results
    from agentsynth_kernel import ToolSpec

    login = ToolSpec("login", "Log in", {"type": "object", "properties": {"password": {"type": "string"}}})
    r = make_result("t", 0, True)
    r.trajectory.tools = [login]
    r.trajectory.steps[0] = Step(ToolCall("login", {"password": "hunter2-hunter2", "user": "bob"}, "c1"),
                                 Observation("ok\nsk-unknownkey0123456789\n", data={7: "int keys are fine"}), turn=0)
    r.trajectory.metadata["nested"] = {"credentials": {"user": "bob", "pin": "123456"}}
    before = copy.deepcopy(r)
    stats: Counter[str] = Counter()
    clean = list(scrub_results([r, make_result("u", 0, True)], stats))[0]
    step = clean.trajectory.steps[0]
    assert step.action.arguments == {"password": "<redacted>", "user": "bob"}
    assert step.observation.content == "ok\n<redacted>\n"  # a key on its own line is a key too
    assert clean.trajectory.metadata["nested"] == {"credentials": {"user": "<redacted>", "pin": "<redacted>"}}
    assert clean.trajectory.tools == [login]  # a parameter named password is a name, not a secret
    assert stats["secrets_redacted"] == 4
    assert r == before  # the caller's records are not changed


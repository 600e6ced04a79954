"""Secrets the process knows are masked by value in everything a run writes, even when the agent
echoes them back: a provider key from the environment, a key given in the spec, a password in a URL."""

from __future__ import annotations

from pathlib import Path

from agentsynth_kernel.secrets import redact_bytes, redact_text, remember

ENV_KEY = "sk-envkey-0123456789abcdef"
SPEC_KEY = "zz-spec-secret-98765"  # no known key shape: only masking by value can catch it
URL_PASSWORD = "hunter2-password"

AGENT = '''
import os
from agentsynth_kernel import Answer, ToolCall

def act(state, api_key, api_base):
    leak = " ".join([os.environ["OPENAI_API_KEY"], api_key, api_base])
    if not state.trajectory.steps:
        return ToolCall("set", {"key": "a", "value": leak})
    return Answer("my secrets: " + leak)
'''

SPEC = f"""
environment: {{type: kv}}
policy:
  type: callable
  function: agent.py:act
  params: {{api_key: {SPEC_KEY}, api_base: "https://bob:{URL_PASSWORD}@llm.example/v1"}}
tasks:
  - {{id: t, instruction: "x", checkers: [{{type: kv_equals, key: a, value: "1"}}]}}
"""


def test_echoed_secrets_reach_no_file_of_the_run(cli, write, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    write("agent.py", AGENT)
    write("spec.yaml", SPEC)
    code, out, err = cli("run", "spec.yaml", "--run-dir", "d", "--json", "report.json")
    assert code == 0, out + err
    written = [p for p in Path(tmp_path / "d").rglob("*") if p.is_file()] + [tmp_path / "report.json"]
    assert len(written) >= 2
    for path in written:
        data = path.read_bytes()
        for secret in (ENV_KEY, SPEC_KEY, URL_PASSWORD):
            assert secret.encode() not in data, f"{secret} in {path}"
    assert b"<redacted>" in (tmp_path / "report.json").read_bytes()
    for stream in (out, err):
        assert ENV_KEY not in stream and SPEC_KEY not in stream and URL_PASSWORD not in stream
    code, shown, _ = cli("inspect", "d", "t")
    assert code == 0 and "my secrets: <redacted>" in shown
    assert SPEC_KEY not in shown and ENV_KEY not in shown and URL_PASSWORD not in shown


def test_redaction_by_value_and_of_url_userinfo():
    remember("plain-secret-value")
    assert redact_text("the key is plain-secret-value.") == "the key is <redacted>."
    assert redact_bytes(b'{"a":"plain-secret-value"}') == b'{"a":"<redacted>"}'
    assert redact_text("see https://user:pw123456@host/x") == "see https://user:<redacted>@host/x"
    assert redact_bytes(b'"https://user:pw123456@host/x"') == b'"https://user:<redacted>@host/x"'
    remember("short")  # under 6 characters: never masked inside text (too many false hits)
    assert redact_text("a short answer") == "a short answer"


def test_known_secrets_are_what_redact_text_masks_by_value(monkeypatch):
    """known_secrets() lists exactly the values redact_text masks by value (export's fast screen
    searches encoded output for them), longest first."""
    from agentsynth_kernel import known_secrets

    monkeypatch.setenv("ANTHROPIC_API_KEY", "zz-env-value-4242")
    remember("zz-remembered-value-777", "tiny")
    found = known_secrets()
    assert "zz-env-value-4242" in found and "zz-remembered-value-777" in found
    assert "tiny" not in found and redact_text("a tiny b") == "a tiny b"  # too short to mask inside text
    assert list(found) == sorted(found, key=len, reverse=True)
    for secret in found:
        assert secret not in redact_text(f"x {secret} y")

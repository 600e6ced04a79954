"""A scripted OpenAI-compatible server (the kernel's, a real HTTP server on 127.0.0.1) whose answers
depend on the role (read from the system prompt) and the model (weak / strong), and a helper to
write and run generation specs through the real ``agentsynth run`` command."""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from agentsynth_domains.loop import SYSTEM  # noqa: E402
from agentsynth_kernel.testing import Reply, ScriptedLLMServer, reply  # noqa: E402

ROLE_OF = {text: role for role, text in SYSTEM.items()}

Answer = Callable[[str, int], "str | Reply"]  # (user prompt, n-th identical request) -> answer


def role_of(messages: list[dict[str, Any]]) -> str:
    system = next((m["content"] for m in messages if m.get("role") == "system"), "")
    return ROLE_OF.get(system.split("\nRules:")[0], "?")


class Roles:
    """Scripted answers per role; ``weak`` / ``strong`` are the solver answers per model."""

    def __init__(self, **answers: Answer) -> None:
        self.answers = answers
        self.seen: Counter[tuple[str, str, str]] = Counter()
        self.log: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply:
        messages = body.get("messages", [])
        role = role_of(messages)
        model = str(body.get("model", ""))
        who = role
        if role == "solver":
            who = "weak" if model.endswith("weak") else "strong"
        user = next((m["content"] for m in messages if m.get("role") == "user"), "")
        with self.lock:
            key = (who, model, user)
            n = self.seen[key]
            self.seen[key] += 1
            self.log.append({"role": role, "who": who, "model": model, "messages": messages, "user": user,
                             "body": body, "at": time.monotonic()})
        answer = self.answers.get(who)
        if answer is None:
            return reply(json.dumps({"pass": True, "reason": "fine"}) if who == "auditor" else "no script")
        out = answer(user, n)
        return out if isinstance(out, Reply) else reply(out)

    def calls(self, who: str) -> list[dict[str, Any]]:
        return [e for e in self.log if e["who"] == who]


@pytest.fixture
def server():
    with ScriptedLLMServer() as srv:
        yield srv


def llm(server: ScriptedLLMServer, name: str) -> dict[str, Any]:
    return {"model": f"hosted_vllm/{name}", "api_base": server.base_url}


def spec_text(server: ScriptedLLMServer, domain: Any, **extra: Any) -> str:
    gen = {"type": "autosynth", "domain": domain, "challenger": llm(server, "challenger"),
           "weak": llm(server, "weak"), "strong": llm(server, "strong"), "judge": llm(server, "judge"),
           "cache": False, **extra}
    return json.dumps({"name": "test", "generate": gen})


@pytest.fixture
def run_spec(tmp_path: Path):
    """Write a spec and run it through the real ``agentsynth run`` click command (in process)."""
    from click.testing import CliRunner

    from agentsynth_kernel.cli import cli as main

    def go(text: str, *args: str, name: str = "spec.yaml", run_dir: str = "run") -> tuple[int, dict[str, Any], str]:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        report_path = tmp_path / f"{name}.report.json"
        result = CliRunner().invoke(main, ["run", str(path), "--run-dir", str(tmp_path / run_dir), "--json",
                                           str(report_path), "-q", *args])
        data = json.loads(report_path.read_text()) if report_path.exists() else {}
        return result.exit_code, data, result.output + (str(result.exception) if result.exception else "")

    return go


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]

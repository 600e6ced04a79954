"""Output loads in `datasets` and is TRL's conversational SFT format (messages with tool_calls + tools)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from agentsynth_generate import generate_records
from agentsynth_kernel.testing import reply, tool_calls
from conftest import WEATHER_TOOLS, base

ROOT = Path(__file__).resolve().parents[3]


def mixed_records(server: Any, tmp_path: Path) -> list[dict[str, Any]]:
    rows = []
    for params in ({"mode": ["single_agent", "back", "multi_agent"]}, {"mode": ["multi_agent"], "per_role": True}):
        records, _ = generate_records(base(server, tools=WEATHER_TOOLS, query=["Weather in Lisbon?"], **params))
        rows += records
    return rows


def write(rows: list[dict[str, Any]], path: Path) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_records_load_in_datasets(model: Any, tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    m, server = model
    rows = mixed_records(server, tmp_path)
    ds = datasets.load_dataset("json", data_files=str(write(rows, tmp_path / "out.jsonl")), split="train")
    assert ds.num_rows == len(rows) == 4
    assert set(ds.column_names) >= {"messages", "tools", "mode", "grounding", "verification"}
    first = ds[0]["messages"]
    assert first[2]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert json.loads(first[2]["tool_calls"][0]["function"]["arguments"]) == {"city": "Lisbon"}


def test_tools_of_different_shapes_in_one_file(model: Any, tmp_path: Path) -> None:
    """A world's tools (sql: a parameter whose type is a list) and a catalog's in the same file: the
    ``tools`` column is kept as OpenAI tool dicts, and datasets still loads the file."""
    datasets = pytest.importorskip("datasets")
    m, server = model
    sql_tools = [{"type": "function", "function": {"name": "sql_query", "description": "q", "parameters": {
        "type": "object", "properties": {"sql": {"type": "string"}, "params": {"type": "array", "items": {
            "type": ["string", "number", "null"]}}}, "required": ["sql"]}}}]

    def agent(request: dict[str, Any]) -> Any:
        if request["tools"][0]["function"]["name"] == "get_weather":
            return m.default_agent(request)
        if any(x["role"] == "tool" for x in request["messages"]):
            return reply("1")
        return tool_calls(("sql_query", {"sql": "SELECT 1"}))

    m.agent = agent
    a, _ = generate_records(base(server, tools=WEATHER_TOOLS, query=["Weather?"]))
    b, _ = generate_records(base(server, tools=sql_tools, query=["One?"]))
    ds = datasets.load_dataset("json", data_files=str(write(a + b, tmp_path / "mixed.jsonl")), split="train")
    assert ds.num_rows == 2


def _trl_python() -> str | None:
    candidate = os.environ.get("AGENTSYNTH_TRL_PYTHON") or str(ROOT / ".nox" / "rl-train" / "bin" / "python")
    if not Path(candidate).is_file():
        return None
    probe = subprocess.run([candidate, "-c", "import trl"], capture_output=True)
    return candidate if probe.returncode == 0 else None


TRL_CHECK = textwrap.dedent("""
    import json, sys
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    from trl.data_utils import apply_chat_template, is_conversational

    # a word-level tokenizer built here (no download) with a chat template that renders tool calls
    tok = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]")
    tokenizer.chat_template = (
        "{% for t in tools or [] %}<tool>{{ t['function']['name'] }}</tool>{% endfor %}"
        "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] or '' }}"
        "{% for c in m.get('tool_calls') or [] %}<call>{{ c['function']['name'] }} {{ c['function']['arguments'] }}</call>{% endfor %}"
        "</{{ m['role'] }}>{% endfor %}")
    out = []
    for line in open(sys.argv[1]):
        row = json.loads(line)
        example = {"messages": row["messages"], "tools": row["tools"]}
        assert is_conversational(example), row["id"]
        text = apply_chat_template(example, tokenizer, tools=row["tools"] or None)["text"]
        out.append(text)
    print(json.dumps(out))
""")


@pytest.mark.slow  # imports torch in another venv (~30 s): pytest -m slow
def test_records_are_trl_conversational_sft_examples(model: Any, tmp_path: Path) -> None:
    python = _trl_python()
    if python is None:
        pytest.skip("trl is not installed here: set AGENTSYNTH_TRL_PYTHON or create the rl-train nox venv")
    m, server = model
    rows = mixed_records(server, tmp_path)
    proc = subprocess.run([python, "-c", TRL_CHECK, str(write(rows, tmp_path / "out.jsonl"))], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    texts = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(texts) == len(rows)
    assert '<call>get_weather {"city": "Lisbon"}</call>' in texts[0] and "<tool>get_weather</tool>" in texts[0]
    assert sys.version_info >= (3, 11)

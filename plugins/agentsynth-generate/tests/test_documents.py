"""Documents as a world: search and read run for real over the files; questions from passages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentsynth_generate import generate_records
from agentsynth_kernel import SpecError
from agentsynth_kernel.testing import reply, tool_calls
from conftest import base


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    d = tmp_path / "docs"
    d.mkdir()
    (d / "library.md").write_text("# Library\nThe library opens at 9:00 and closes at 18:00 on weekdays.\n")
    (d / "pool.txt").write_text("The pool opens at 7:00. Lanes are reserved for swimmers after 19:00.\n")
    (d / "image.png").write_bytes(b"\x89PNG not a document")
    return d


def docs_agent(request: dict[str, Any]) -> Any:
    tool = [m for m in request["messages"] if m["role"] == "tool"]
    if not tool:
        question = request["messages"][1]["content"]
        return tool_calls(("search_documents", {"query": question}), content="I will search the documents.")
    hits = json.loads(tool[-1]["content"])
    return reply(f"According to {hits[0]['document']}: {hits[0]['text'].splitlines()[-1]}" if hits else "The documents do not say.")


def test_questions_from_passages_answered_from_the_documents(model: Any, docs: Path) -> None:
    m, server = model
    m.agent = docs_agent
    records, report = generate_records(base(server, docs=str(docs), sample=2, seed=1))
    assert report["accepted"] == 2 and report["requests_by_purpose"]["question"] == 2
    for record in records:
        assert record["grounding"] == "documents" and record["verification"]["world"] == "not_checked"
        assert record["query"] in (f"When does the {w} open?" for w in ("library", "pool"))
        hits = json.loads(record["messages"][3]["content"])  # the real search over the files
        expected = "library.md" if "library" in record["query"] else "pool.txt"
        assert hits[0]["document"] == expected
        assert expected in record["messages"][-1]["content"]
    assert {t["function"]["name"] for t in records[0]["tools"]} == {"search_documents", "read_document"}


def test_reading_a_document_that_is_not_there_is_an_error_result(model: Any, docs: Path) -> None:
    m, server = model
    m.agent = lambda r: (reply("done") if any(x["role"] == "tool" for x in r["messages"])
                         else tool_calls(("read_document", {"name": "../../etc/passwd"})))
    records, report = generate_records(base(server, docs=str(docs), query=["Read the password file"]))
    assert report["stages"]["execution"]["rejected"] == {"tool_error": 1}


def test_bad_docs_inputs(model: Any, tmp_path: Path, docs: Path) -> None:
    m, server = model
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SpecError, match="no documents"):
        generate_records(base(server, docs=str(empty)))
    with pytest.raises(SpecError, match="docs: the documents are the world"):
        generate_records(base(server, docs=str(docs), tools=[{"name": "x"}]))

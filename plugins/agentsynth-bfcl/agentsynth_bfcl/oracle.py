"""The oracle of a generated BFCL pack: the ground-truth calls, then a short answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .env import item_functions
from .matcher import ground_truth_calls


def oracle_actions(task: Any, pack_dir: Path) -> list[dict[str, Any]]:
    """The calls the possible answers of ``task``'s ``bfcl_ast`` checker accept, one per expected call
    (none for irrelevance; the first offered function for relevance)."""
    checker = next((c for c in task.checkers if c.type == "bfcl_ast"), None)
    if checker is None:
        raise ValueError(f"task {task.id!r} has no bfcl_ast checker")
    kind = checker.params.get("kind", "calls")
    functions = task.environment.get("functions") or item_functions(
        pack_dir / task.environment.get("functions_file", "functions.jsonl"), task.environment["item"])
    if kind == "irrelevance":
        return [{"answer": "None of the functions I can call fits this request, so I made no call."}]
    if kind == "relevance":
        from .matcher import tool_name

        return [{"tool": tool_name(functions[0]["name"]), "arguments": {}}, {"answer": "Done."}]
    calls = ground_truth_calls(functions, checker.params["answers"])
    return [*({"tool": name, "arguments": arguments} for name, arguments in calls), {"answer": "Done."}]

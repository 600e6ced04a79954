"""Write small composite packs over the test worlds into a directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml


def write_pack(directory: Path, environment: dict[str, Any], tasks: list[dict[str, Any]],
               oracle: dict[str, list[dict[str, Any]]] | None = None, **extra: Any) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    data = {"id": directory.name, "environment": environment, "tasks": tasks, **extra}
    (directory / "pack.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    if oracle is not None:
        (directory / "oracle.py").write_text(f"import json\nORACLE = json.loads({json.dumps(oracle)!r})\n",
                                             encoding="utf-8")
    return directory


TWO_COUNTERS = {"type": "composite", "worlds": {"a": {"type": "t_counter"}, "b": {"type": "t_counter", "start": 10}}}
COUNTER_KV = {"type": "composite", "worlds": {"c": {"type": "t_counter"}, "kv": {"type": "t_kv"}}}


def both_task(task_id: str = "both") -> dict[str, Any]:
    return {"id": task_id, "instruction": "Add 3 to the counter and store done=yes.",
            "checkers": [{"type": "composite", "world": "c", "checker": {"type": "t_count_is", "value": 3}},
                         {"type": "composite", "world": "kv", "checker": {"type": "t_kv_has", "key": "done",
                                                                          "value": "yes"}}]}


BOTH_ORACLE = {"both": [{"tool": "c__inc", "arguments": {"by": 3}},
                        {"tool": "kv__put", "arguments": {"key": "done", "value": "yes"}},
                        {"answer": "counter at 3, done stored"}]}

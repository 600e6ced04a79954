"""``agentsynth flywheel``: failures -> data aimed at them.

1. **Failures** come from a run directory (``agentsynth bench/run --run-dir``: failed episodes, by error
   kind or failing checker), from ``agentsynth eval`` output (rows whose rubric dimensions are weak), from
   ``--rejected`` records of a generation (by stage and reason), or from a trajectory file that is scored
   first (``eval``).
2. **Mining** groups them by kind and by dimension and takes their queries (a run's: the failed tasks).
3. **Generation** makes ``-n`` new verified trajectories per target, in the world (``--pack``; a run's
   pack by default) or with a catalog (``--tools``, else the tools the failing records list); every record
   carries ``metadata.aimed_at``.
4. **Export**: the accepted records to ``-o`` (JSONL, the same format as ``agentsynth generate``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from agentsynth_kernel import SpecError, ToolSpec

from .catalog import Scenario, parse_tools


@attrs.define
class Mined:
    targets: list[Scenario]
    by_kind: dict[str, int]
    by_dimension: dict[str, int]
    tools: list[ToolSpec]
    pack: Any = None
    source: str = ""


def _count(counter: dict[str, int], key: str) -> None:
    counter[key] = counter.get(key, 0) + 1


def mine_run(run_dir: Path, host: Any, pack_ref: str | None, max_targets: int) -> Mined:
    """Failed episodes of a run directory: one target per failed task, with the pack's task (so the world checks it)."""
    from agentsynth_kernel import RunStore, load_pack

    if not (run_dir / "run.sqlite").is_file():
        raise SpecError(str(run_dir), ["not a run directory (no run.sqlite): give one written by "
                                       "`agentsynth bench --run-dir` or `agentsynth run`"])
    store = RunStore(run_dir, create=False)
    try:
        meta_pack = store.get_meta("pack") or {}
        results = list(store.results())
    finally:
        store.close()
    ref = pack_ref or (meta_pack.get("source") if isinstance(meta_pack, dict) else None)
    if not ref:
        raise SpecError(str(run_dir), ["the run does not record its pack: give --pack"])
    pack = load_pack(Path(ref).parent if str(ref).endswith("pack.yaml") else ref, host=host)
    tasks = {t.id: t for t in pack.tasks}
    by_kind: dict[str, int] = {}
    by_dimension: dict[str, int] = {}
    aimed: dict[str, list[str]] = {}
    for result in results:
        if result.passed:
            continue
        failing = [v.checker for v in result.verdicts if not v.passed]
        # a plain failure (error_kind agent) is named by the checker that failed; errors by who failed
        kind = f"checker:{failing[0]}" if failing and result.error_kind in ("", "agent") else (result.error_kind or "failed")
        _count(by_kind, kind)
        for dim, score in result.scores.items():
            if isinstance(score, (int, float)) and score < 0.5:
                _count(by_dimension, dim)
        if result.task_id in tasks:
            aimed.setdefault(result.task_id, [])
            if kind not in aimed[result.task_id]:
                aimed[result.task_id].append(kind)
    targets = [Scenario(f"fw-{tid}", tasks[tid].instruction, source=f"run {run_dir}", task=tasks[tid],
                        metadata={"aimed_at": kinds}) for tid, kinds in list(aimed.items())[:max_targets]]
    return Mined(targets, by_kind, by_dimension, [], pack, str(run_dir))


def mine_file(path: Path, max_targets: int) -> tuple[Mined, bool]:
    """Failures in a records file; returns (mined, needs_eval): a file with neither ``eval`` nor ``rejected``
    rows must be scored first."""
    from .evaluate import read_conversations

    conversations = list(read_conversations(path))
    rows = [c.row for c in conversations]
    if not any("eval" in r or "rejected" in r for r in rows):
        return Mined([], {}, {}, []), True
    by_kind: dict[str, int] = {}
    by_dimension: dict[str, int] = {}
    targets: list[Scenario] = []
    tools: dict[str, ToolSpec] = {}
    seen: set[str] = set()
    for conv in conversations:
        row = conv.row
        aimed: list[str] = []
        if isinstance(row.get("rejected"), dict):
            kind = f"{row['rejected'].get('stage')}:{row['rejected'].get('reason')}"
            _count(by_kind, kind)
            aimed.append(kind)
        weak = (row.get("eval") or {}).get("weak") or []
        for dim in weak:
            _count(by_dimension, dim)
            aimed.append(dim)
        if not aimed or not conv.query.strip() or conv.query in seen:
            continue
        seen.add(conv.query)
        for tool in parse_tools(conv.tools, f"{path}: {conv.id}.tools") if conv.tools else []:
            tools.setdefault(tool.name, tool)
        if len(targets) < max_targets:
            targets.append(Scenario(f"fw-{len(targets)}", conv.query, domain=str(row.get("domain", "") or ""),
                                    source=str(path), metadata={"aimed_at": aimed, "from": conv.id}))
    return Mined(targets, by_kind, by_dimension, list(tools.values()), None, str(path)), False

"""A run's results without holding them all in memory: a tally kept as they arrive, and the
results themselves in the run store (or, for a run without one, in memory until they are many,
then in a temporary store).

A 1M-episode run keeps O(tasks) in memory: the engine plans lazily, counts what finished in a
per-task :class:`Tally`, and :class:`ResultSet` streams the stored episodes back, in (task, trial)
order, whenever someone iterates them (the report's per-episode rows, exports, hooks).
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, overload

import attrs

from .records import EpisodeResult, Usage
from .store import RunStore

# A run without a run directory keeps this many results in memory, then moves them to a
# temporary store: small runs (tests, pack validate) never touch the disk, long ones stay flat.
SPILL_AFTER = 4096


@attrs.define
class TaskTally:
    """One task's counts: what pass@1 / pass^k and the per-task table need."""

    tier: str
    split: str
    trials: int = 0
    passed: int = 0
    errors: int = 0


@attrs.define
class Tally:
    """Totals of a run, updated one result at a time (the same numbers a pass over all results gives)."""

    counts: dict[str, int] = attrs.field(factory=lambda: {"passed": 0, "failed": 0, "error": 0})
    errors_by_kind: dict[str, int] = attrs.field(factory=lambda: defaultdict(int))
    judge_errors: int = 0
    usage: Usage = attrs.field(factory=Usage)
    tasks: dict[str, TaskTally] = attrs.field(factory=dict)  # first-seen order

    @property
    def episodes(self) -> int:
        return sum(self.counts.values())

    def add(self, result: EpisodeResult) -> None:
        self.counts[result.status] = self.counts.get(result.status, 0) + 1
        row = self.tasks.get(result.task_id)
        if row is None:
            row = self.tasks[result.task_id] = TaskTally(result.tier, result.split)
        row.trials += 1
        if result.status == "passed":
            row.passed += 1
        elif result.status == "error":
            row.errors += 1
            self.errors_by_kind[result.error_kind or "unknown"] += 1
        if result.judge_error:
            self.judge_errors += 1
        self.usage = self.usage + result.usage

    @classmethod
    def of(cls, results: Iterable[EpisodeResult]) -> Tally:
        tally = cls()
        for result in results:
            tally.add(result)
        return tally


class ResultSet(Sequence[EpisodeResult]):
    """The results of a run, iterated in (task, trial) order, streamed from a store when they live in one.

    ``wanted(key)`` keeps a stored episode out when it is not part of this run's plan (a forced
    resume with a changed spec leaves the old episodes in the store). Indexing a stored set reads up
    to that index: fine for ``results[0]``, not meant for random access over a huge run.
    """

    def __init__(self, *, run_dir: Path | None = None, wanted: Any = None, spill_after: int = SPILL_AFTER) -> None:
        self.tally = Tally()
        self._run_dir = Path(run_dir) if run_dir is not None else None
        self._wanted = wanted
        self._memory: list[EpisodeResult] | None = [] if run_dir is None else None
        self._spill_after = spill_after
        self._spill: RunStore | None = None
        self._sorted = True

    @classmethod
    def of_store(cls, store: RunStore) -> ResultSet:
        """Every episode a run directory holds, counted in one streaming pass (``status``)."""
        results = cls(run_dir=store.run_dir)
        for result in store.results():
            results.add(result, stored=True)
        return results

    # --- filling (the engine) ----------------------------------------------------------------------

    def add(self, result: EpisodeResult, *, stored: bool) -> None:
        """Count a finished episode; keep it unless ``stored`` (it is in the run store already)."""
        self.tally.add(result)
        if stored and self._run_dir is not None:
            return
        if self._spill is not None:
            self._spill.put(result, defer=True)  # a scratch store: batched commits, read back at the end
            return
        assert self._memory is not None
        if self._memory and (self._memory[-1].task_id, self._memory[-1].trial) > (result.task_id, result.trial):
            self._sorted = False
        self._memory.append(result)
        if len(self._memory) > self._spill_after:
            self._spill_to_disk()

    def _spill_to_disk(self) -> None:
        directory = Path(tempfile.mkdtemp(prefix="agentsynth-results-"))
        store = RunStore(directory)
        store.db.execute("PRAGMA synchronous=OFF")  # scratch data: a crash loses nothing worth keeping
        with store.transaction():
            for result in self._memory or ():
                store.put(result)
        self._memory, self._spill = None, store
        weakref.finalize(self, _drop_spill, store, directory)

    # --- reading -------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return self.tally.episodes

    def __iter__(self) -> Iterator[EpisodeResult]:
        if self._memory is not None:
            if not self._sorted:
                self._memory.sort(key=lambda r: (r.task_id, r.trial))
                self._sorted = True
            yield from list(self._memory)
            return
        if self._spill is not None:
            yield from self._spill.results()
            return
        assert self._run_dir is not None
        store = RunStore(self._run_dir, create=False)
        try:
            for result in store.results():
                if self._wanted is None or self._wanted(result.key):
                    yield result
        finally:
            store.close()

    @overload
    def __getitem__(self, index: int) -> EpisodeResult: ...

    @overload
    def __getitem__(self, index: slice) -> list[EpisodeResult]: ...

    def __getitem__(self, index: int | slice) -> EpisodeResult | list[EpisodeResult]:
        if isinstance(index, slice) or index < 0:
            return list(self)[index]
        for i, result in enumerate(self):
            if i == index:
                return result
        raise IndexError(index)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, ResultSet)):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        where = "memory" if self._memory is not None else "a store"
        return f"<ResultSet of {len(self)} results in {where}>"


def _drop_spill(store: RunStore, directory: Path) -> None:
    store.close()
    shutil.rmtree(directory, ignore_errors=True)

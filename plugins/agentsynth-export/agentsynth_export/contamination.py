"""``agentsynth pack contamination``: how much of a pack a training corpus has seen, and a held-out
variant of the pack that a memorised answer cannot pass.

Overlap: each task's instruction and its oracle's answer text are cut into word ``n``-grams
(lowercase words, as dedup tokenises); the corpus is streamed (JSONL records or plain text, ``.gz``
too) in chunks, its n-grams hashed with numpy and looked up among the tasks' (64-bit hashes), so a
corpus of any size is read once in constant memory. A text shorter than ``n`` words counts as seen
when it occurs verbatim (as normalized words) in one corpus record (a chunk of a text file). The
overlap of a text is the fraction of its distinct n-grams seen anywhere in the corpus.

Canaries: the string this plugin's exports put in the records of a pack's test-split tasks
(:func:`~agentsynth_export.common.pack_canary`); found in the corpus, the pack's exported records
are in it.

Held-out variant: every task is offered to the plugins' ``perturb_task`` hook (the SQL world
relabels its primary keys in the seed data, the instruction and the checkers); the relabelled
oracle must pass the sibling and the original oracle's transcript, replayed as is, must fail it
(both are run). The tasks that pass both go into a new pack directory with ``pack.yaml`` and an
``oracle.py``; the others are reported with the reason.
"""

from __future__ import annotations

import asyncio
import gzip
import io
import pprint
import re
import shutil
import tempfile
import unicodedata
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import attrs
import msgspec
import numpy as np

from agentsynth_kernel import AgentsynthError, Answer, ToolCall, oracle_actions

from .common import CANARY_PREFIX, pack_canary, tokens

TEXT_CHUNK_CHARS = 1 << 20  # a plain-text file is read in chunks of about 1 MB (n-grams cross lines)
_BITMAP_SHIFT = np.uint64(42)
MAX_LINE_CHARS = 64 << 20  # a longer JSONL line is read as text, in chunks
BATCH_CHARS = 1 << 20  # records hashed together (about 200k words: ~15 MB of transient memory)
JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
MAX_PACK_COPY_BYTES = 200 << 20


# --- n-gram hashing ------------------------------------------------------------------------------------


def _process_hashes(words: list[str]) -> np.ndarray:
    """64-bit hashes of words, consistent within this process (Python's own string hash, computed in
    C; about 5x faster than a memo of stable hashes). Task and corpus n-grams are hashed in the same
    process, and nothing hashed here is stored, so randomised string hashing changes nothing."""
    return np.fromiter(map(hash, words), dtype=np.int64, count=len(words)).view(np.uint64)


class NgramHasher:
    """64-bit hashes of word n-grams: a multiply-add of the words' hashes (vectorised), within one process."""

    def __init__(self, n: int, seed: int = 11) -> None:
        if n < 1:
            raise ValueError("n must be >= 1")
        self.n = n
        rng = np.random.default_rng(seed)
        self._mix = (rng.integers(0, 2**63, size=n, dtype=np.uint64) << np.uint64(1)) | np.uint64(1)

    def hashes(self, docs: list[list[str]], length: int | None = None) -> np.ndarray:
        """The ``length``-gram hashes (default ``n``) of every doc with that many words (not deduplicated)."""
        length = length or self.n
        return self.hashes_by_length(docs, (length,))[length]

    def hashes_by_length(self, docs: list[list[str]], lengths: Iterable[int]) -> dict[int, np.ndarray]:
        """For each length (at most ``n``), the hashes of every run of that many words of each doc;
        the words are hashed once for all lengths."""
        lens = np.fromiter((len(d) for d in docs), dtype=np.int64, count=len(docs))
        flat = [w for d in docs for w in d]
        th = _process_hashes(flat)
        total = len(th)
        starts = np.zeros(len(lens), dtype=np.int64)
        np.cumsum(lens[:-1], out=starts[1:])
        doc_of = np.repeat(np.arange(len(lens)), lens)
        pos = np.arange(total, dtype=np.int64) - starts[doc_of]
        room = lens[doc_of] - pos  # words from each position to the end of its doc
        padded = np.concatenate([th, np.zeros(self.n, dtype=np.uint64)])
        out: dict[int, np.ndarray] = {}
        comb = np.zeros(total, dtype=np.uint64)
        wanted = set(lengths)
        for k in range(max(wanted, default=0)):  # the L-gram hash is the (L-1)-gram hash plus one more word
            comb += padded[k : k + total] * self._mix[k]
            if k + 1 in wanted:
                out[k + 1] = comb[room >= k + 1]
        return out


# --- the tasks' texts ------------------------------------------------------------------------------------


@attrs.define
class TaskText:
    """One text of a task (``instruction`` or ``answer``) and what the corpus scan found of it."""

    task_id: str
    field: str
    text: str
    hashes: np.ndarray  # its distinct n-gram hashes (a short text: the one hash of all its words)
    length: int  # n, or the number of words of a text shorter than n (found only verbatim)
    short: bool = False
    seen: int = 0

    @property
    def size(self) -> int:
        return len(self.hashes)

    @property
    def overlap(self) -> float:
        return self.seen / self.size if self.size else 0.0



def answer_text(actions: list[Any] | None) -> str:
    return "\n".join(a.content for a in actions or () if isinstance(a, Answer))


# --- the corpus -----------------------------------------------------------------------------------------


def _open_text(path: Path) -> io.TextIOBase:
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")  # noqa: SIM115 - closed by the caller


def _strings(value: Any, out: list[str]) -> None:
    """Every string inside a decoded JSON value, in order (iterative: nesting depth costs no stack)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))


_INVISIBLE = dict.fromkeys(map(ord, "\u00ad\u180e\u200b\u200c\u200d\u200e\u200f\u2060\u2061\u2062\u2063\u2064\ufeff"))
_TRAILING_WORD = re.compile(r"\w*\Z")


def clean(text: str) -> str:
    """NFKC (fullwidth and compatibility letters become plain ones) without invisible characters
    (zero-width spaces, soft hyphens), so that a text is not hidden from the scan by its encoding."""
    if text.isascii():
        return text
    return unicodedata.normalize("NFKC", text).translate(_INVISIBLE)


def corpus_records(path: Path) -> Iterator[tuple[str, bool]]:
    """The texts of a corpus file, one per record, each with whether the next one continues it
    (n-grams run across): a JSONL line's strings (every string value, e.g. the messages of a chat
    record), or a chunk of about 1 MB of a text file, cut between words. A line of a JSONL file
    that is not JSON, or is longer than ``MAX_LINE_CHARS``, is read as text (a long one in chunks,
    so that memory stays bounded whatever the file holds)."""
    stem = path.name[:-3] if path.name.endswith(".gz") else path.name
    jsonl = stem.endswith(JSONL_SUFFIXES)
    decode = msgspec.json.decode
    with _open_text(path) as f:
        if not jsonl:
            yield from _text_chunks(f, "")
            return
        while True:
            line = f.readline(MAX_LINE_CHARS)
            if not line:
                return
            if len(line) >= MAX_LINE_CHARS and not line.endswith("\n"):
                yield from _text_chunks(f, line, until_newline=True)
                continue
            if not line.strip():
                continue
            try:
                value = decode(line)
            except (msgspec.DecodeError, RecursionError):  # not JSON, or nested deeper than msgspec decodes
                yield line, False
                continue
            parts: list[str] = []
            _strings(value, parts)
            yield "\n".join(parts), False


def _text_chunks(f: Any, first: str, *, until_newline: bool = False) -> Iterator[tuple[str, bool]]:
    """Chunks of about ``TEXT_CHUNK_CHARS`` (of the rest of the line, with ``until_newline``), cut
    after the last whole word; each but the last continues into the next."""
    pending = first
    while True:
        if until_newline:
            piece = f.readline(TEXT_CHUNK_CHARS)
            done = not piece or piece.endswith("\n")
        else:
            piece = f.read(TEXT_CHUNK_CHARS)
            done = not piece
        text = pending + piece
        if done:
            if text:
                yield text, False
            return
        tail = _TRAILING_WORD.search(text)
        cut = tail.start() if tail is not None and tail.start() > 0 else len(text)
        pending = text[cut:]
        yield text[:cut], True


def check_corpus_files(files: Iterable[Path]) -> list[Path]:
    out = []
    for path in files:
        if not path.exists():
            raise AgentsynthError(f"{path}: --corpus: no such file")
        if path.is_dir():
            raise AgentsynthError(f"{path}: --corpus: is a directory (give the files: DIR/*.jsonl)")
        out.append(path)
    if not out:
        raise AgentsynthError("--corpus: give at least one corpus file (JSONL or text)")
    return out


# --- the scan -------------------------------------------------------------------------------------------


class ContaminationScan:
    """Streams corpus files once and counts, for each task text, how many of its n-grams occur."""

    def __init__(self, texts: list[TaskText], canaries: dict[str, str], n: int, hasher: NgramHasher) -> None:
        self.texts = texts
        self.n = n
        self.hasher = hasher
        self.canaries = canaries  # canary string -> what it marks
        self.canary_hits: dict[str, int] = dict.fromkeys(canaries, 0)
        self.any_canary = 0  # records holding any agentsynth canary
        # per n-gram length (n, and the lengths of the short texts): the sorted keys and what was seen
        self.keys: dict[int, np.ndarray] = {}
        for length in sorted({t.length for t in texts}):
            self.keys[length] = np.unique(np.concatenate([t.hashes for t in texts if t.length == length]))
        self.found = {length: np.zeros(len(k), dtype=bool) for length, k in self.keys.items()}
        self.bitmap = np.zeros(1 << (64 - _BITMAP_SHIFT), dtype=bool)  # 4 MB: a prefilter over every length
        for k in self.keys.values():
            self.bitmap[k >> _BITMAP_SHIFT] = True
        self.records = 0
        self.chars = 0

    def scan_file(self, path: Path) -> None:
        batch: list[list[str]] = []
        size = 0
        carry: list[str] = []
        keep = self.n - 1
        for record, continues in corpus_records(path):
            record = clean(record)
            self.records += 1
            self.chars += len(record)
            if CANARY_PREFIX in record:
                self.any_canary += 1
                for canary in self.canaries:
                    if canary in record:
                        self.canary_hits[canary] += 1
            toks = tokens(record)
            if carry:  # the end of the record this one continues: n-grams across the cut
                toks = carry + toks
            carry = toks[-keep:] if continues and keep else []
            batch.append(toks)
            size += len(record)
            if size >= BATCH_CHARS:
                self._flush(batch)
                batch, size = [], 0
        if batch:
            self._flush(batch)

    def _flush(self, batch: list[list[str]]) -> None:
        """Mark the task n-grams that occur in ``batch``: for each length, the corpus hashes go
        through a bitmap of the tasks' hashes (one gather), and only the few that pass are looked
        up exactly (most corpus text shares nothing with a pack)."""
        if not self.keys:
            return
        lens = np.fromiter((len(d) for d in batch), dtype=np.int64, count=len(batch))
        th = _process_hashes([w for d in batch for w in d])
        total = len(th)
        if not total:
            return
        starts = np.zeros(len(lens), dtype=np.int64)
        np.cumsum(lens[:-1], out=starts[1:])
        doc_of = np.repeat(np.arange(len(lens)), lens)
        room = lens[doc_of] - (np.arange(total, dtype=np.int64) - starts[doc_of])  # words left in the doc
        padded = np.concatenate([th, np.zeros(self.n, dtype=np.uint64)])
        comb = np.zeros(total, dtype=np.uint64)
        mix = self.hasher._mix
        for k in range(max(self.keys)):
            comb += padded[k : k + total] * mix[k]
            keys = self.keys.get(k + 1)
            if keys is None:
                continue
            cand = np.flatnonzero(self.bitmap[comb >> _BITMAP_SHIFT])
            cand = cand[room[cand] >= k + 1]
            if not len(cand):
                continue
            hashes = comb[cand]
            pos = np.searchsorted(keys, hashes)
            pos[pos >= len(keys)] = 0
            hit = keys[pos] == hashes
            self.found[k + 1][pos[hit]] = True

    def finish(self) -> None:
        for t in self.texts:
            keys = self.keys[t.length]
            t.seen = int(self.found[t.length][np.searchsorted(keys, t.hashes)].sum())


# --- the report -----------------------------------------------------------------------------------------


def task_texts(pack: Any, n: int, hasher: NgramHasher) -> tuple[list[TaskText], dict[str, list[Any] | None]]:
    texts: list[TaskText] = []
    oracles: dict[str, list[Any] | None] = {}
    for task in pack.tasks:
        actions = oracle_actions(pack, task)  # the kernel's: None when the pack has none for it
        oracles[task.id] = actions
        for field, text in (("instruction", task.instruction), ("answer", answer_text(actions))):
            toks = tokens(clean(text))
            if not toks:
                continue
            length = min(n, len(toks))
            texts.append(TaskText(task.id, field, text, np.unique(hasher.hashes([toks], length)), length,
                                  short=length < n))
    return texts, oracles


def contamination_report(pack: Any, corpus: list[Path], *, n: int = 13, threshold: float = 0.5,
                         ) -> tuple[dict[str, Any], dict[str, list[Any] | None]]:
    """The report (plain data) and the oracle actions per task (for the held-out variant)."""
    files = check_corpus_files(corpus)
    hasher = NgramHasher(n)
    texts, oracles = task_texts(pack, n, hasher)
    canary = pack_canary(pack)
    scan = ContaminationScan(texts, {canary: pack.id}, n, hasher)
    for path in files:
        try:
            scan.scan_file(path)
        except OSError as exc:
            raise AgentsynthError(f"{path}: --corpus: cannot be read: {exc}") from exc
    scan.finish()
    canary_found = scan.canary_hits[canary] > 0
    by_task: dict[str, dict[str, TaskText]] = {}
    for t in texts:
        by_task.setdefault(t.task_id, {})[t.field] = t
    tasks = []
    for task in pack.tasks:
        fields = by_task.get(task.id, {})
        row: dict[str, Any] = {"id": task.id, "split": task.split}
        for field in ("instruction", "answer"):
            text = fields.get(field)
            row[field] = None if text is None else {
                "overlap": round(text.overlap, 4), "ngrams": text.size, "seen": text.seen,
                "verbatim_only": bool(text.short)}
        worst = max((f.overlap for f in fields.values()), default=0.0)
        row["overlap"] = round(worst, 4)
        row["canary"] = canary
        row["canary_found"] = canary_found
        row["contaminated"] = worst >= threshold or canary_found
        tasks.append(row)
    report = {
        "pack": pack.id, "pack_hash": pack.content_hash, "n": n, "threshold": threshold,
        "corpus": {"files": [str(p) for p in files], "records": scan.records, "chars": scan.chars,
                   "records_with_an_agentsynth_canary": scan.any_canary},
        "canary": canary, "canary_found": canary_found,
        "tasks": tasks,
        "contaminated": [r["id"] for r in tasks if r["contaminated"]],
        "max_overlap": max((r["overlap"] for r in tasks), default=0.0),
    }
    return report, oracles


# --- the held-out variant ---------------------------------------------------------------------------------


def _task_data(task: Any) -> dict[str, Any]:
    """A Task as pack.yaml writes it (defaults left out)."""
    data: dict[str, Any] = {"id": task.id}
    if task.tier:
        data["tier"] = task.tier
    data["split"] = task.split
    data["instruction"] = task.instruction
    if task.environment:
        data["environment"] = task.environment
    if task.max_steps is not None:
        data["max_steps"] = task.max_steps
    data["checkers"] = [c.to_dict() if c.params else c.type for c in task.checkers]
    if task.metadata:
        data["metadata"] = task.metadata
    return data


def _action_data(action: Any) -> dict[str, Any]:
    if isinstance(action, Answer):
        return {"answer": action.content}
    if isinstance(action, ToolCall):
        return {"tool": action.name, "arguments": action.arguments}
    raise AgentsynthError(f"unexpected oracle action {action!r}")


def _yaml_dump(data: Any) -> str:
    import yaml

    dumper_cls: Any = type("Dumper", (yaml.SafeDumper,), {})  # a subclass, so the representer stays local

    def text(dumper: Any, value: str) -> Any:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    dumper_cls.add_representer(str, text)
    return str(yaml.dump(data, Dumper=dumper_cls, sort_keys=False, allow_unicode=True, width=110))


async def _play(host: Any, pack: Any, task: Any, actions: list[Any], seed: int, timeout: float) -> Any:
    from agentsynth_kernel import ComponentSpec, EpisodeConfig, run_episode

    config = EpisodeConfig(ComponentSpec("scripted", {"actions": actions}), timeout=timeout)
    return await run_episode(host, pack, task, 0, seed, config)


def relabel_tasks(pack: Any, oracles: dict[str, list[Any] | None], *, seed: int = 0, verify: bool = True,
                  timeout: float = 60.0) -> tuple[list[tuple[Any, list[Any] | None]], dict[str, str]]:
    """(sibling task, relabelled oracle actions) for every task the world relabels and (with
    ``verify``) whose relabelled oracle passes while the original transcript fails; and the
    reason for every other task."""
    from agentsynth_kernel import get_host
    from agentsynth_kernel.testing.adversarial import relabel_data

    host = get_host()
    done: list[tuple[Any, list[Any] | None]] = []
    skipped: dict[str, str] = {}
    for task in pack.tasks:
        try:
            sibling = host.pm.hook.perturb_task(pack=pack, task=task, seed=seed)
        except Exception as exc:  # a plugin's bug fails this task, not the command
            skipped[task.id] = f"perturb_task raised {type(exc).__name__}: {exc}"
            continue
        if sibling is None:
            skipped[task.id] = ("the world cannot relabel it (no perturb_task for this world, or a task checked on "
                                "the answer, which relabelled ids would not change)")
            continue
        original = oracles.get(task.id)
        carried = None if original is None else [relabel_data(a, sibling.relabel) for a in original]
        if verify and carried is not None:
            passed = asyncio.run(_play(host, sibling.pack, sibling.task, carried, seed, timeout))
            if not passed.passed:
                skipped[task.id] = ("the relabelled oracle does not pass the relabelled task "
                                    f"({passed.error or passed.status}): a perturbation bug")
                continue
            replayed = asyncio.run(_play(host, sibling.pack, sibling.task, list(original or []), seed, timeout))
            if replayed.passed:
                skipped[task.id] = "the original oracle's transcript, replayed as is, still passes the relabelled task"
                continue
        done.append((sibling.task, carried))
    return done, skipped


def write_held_out(pack: Any, relabelled: list[tuple[Any, list[Any] | None]], out: Path, *,
                   pack_id: str | None = None) -> Path:
    """Write the held-out pack directory: the pack's data files, ``pack.yaml`` with the relabelled
    tasks (an environment override every task shares, such as the relabelled seed, is written once
    at the pack level) and ``oracle.py`` with the relabelled oracle. Refuses a non-empty ``out``."""
    from agentsynth_kernel import read_yaml

    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise AgentsynthError(f"{out}: --held-out-out: exists and is not an empty directory")
    if not relabelled:
        raise AgentsynthError(f"{out}: --held-out-out: no task of pack {pack.id!r} could be relabelled; nothing written")
    source = Path(pack.source)
    raw = read_yaml(source) if source.is_file() else {}
    data: dict[str, Any] = {k: v for k, v in raw.items() if k not in ("tasks", "oracle")} if isinstance(raw, dict) else {}
    data["id"] = pack_id or f"{pack.id}-heldout"
    data["description"] = (f"Held-out variant of pack {pack.id!r} ({pack.content_hash}): ids and codes of the world "
                           "relabelled, so that a memorised transcript or answer does not pass. "
                           "Written by agentsynth pack contamination.")
    tasks = [t for t, _ in relabelled]
    shared: dict[str, Any] = {}
    for key, value in tasks[0].environment.items():
        if all(key in t.environment and t.environment[key] == value for t in tasks[1:]):
            shared[key] = value
    if shared:
        env = dict(data.get("environment") or {})
        if isinstance(data.get("environment"), str):
            env = {"type": data["environment"]}
        env.update(shared)
        data["environment"] = env
    rows = []
    for t in tasks:
        row = _task_data(t)
        rest = {k: v for k, v in t.environment.items() if k not in shared}
        if rest:
            row["environment"] = rest
        else:
            row.pop("environment", None)
        rows.append(row)
    has_oracle = any(actions is not None for _, actions in relabelled)
    if has_oracle:
        data["oracle"] = "oracle.py"
    data["tasks"] = rows
    staging = Path(tempfile.mkdtemp(prefix=".heldout-", dir=out.parent if out.parent.exists() else None))
    try:
        _copy_data_files(pack, staging)
        (staging / "pack.yaml").write_text(_yaml_dump(data), encoding="utf-8")
        if has_oracle:
            table = {t.id: [_action_data(a) for a in actions] for t, actions in relabelled if actions is not None}
            (staging / "oracle.py").write_text(
                f'"""The relabelled oracle of the held-out variant of pack {pack.id!r} (written by agentsynth).\"\"\"\n\n'
                f"ORACLE = {pprint.pformat(table, width=110, sort_dicts=False)}\n", encoding="utf-8")
        if out.exists():
            out.rmdir()
        out.parent.mkdir(parents=True, exist_ok=True)
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out


def _copy_data_files(pack: Any, dest: Path) -> None:
    """The files a pack's environment may name (schema, seed, fixtures): the pack directory's
    files except pack.yaml and the oracle, for a pack.yaml directory only."""
    source = Path(pack.source)
    if source.name != "pack.yaml":
        return
    base = Path(pack.base_dir)
    skip = {source.resolve(), *([pack.oracle_path.resolve()] if pack.oracle_path else [])}
    total = 0
    for path in sorted(base.rglob("*")):
        rel = path.relative_to(base)
        if any(p.startswith(".") or p == "__pycache__" for p in rel.parts) or path.resolve() in skip:
            continue
        if path.is_symlink() and base.resolve() not in path.resolve().parents:
            continue  # a link out of the pack directory is not the pack's data
        if path.is_dir():
            (dest / rel).mkdir(parents=True, exist_ok=True)
            continue
        total += path.stat().st_size
        if total > MAX_PACK_COPY_BYTES:
            raise AgentsynthError(f"{base}: the pack directory holds more than {MAX_PACK_COPY_BYTES >> 20} MB of files; "
                                  "not copied into the held-out variant")
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, dest / rel)

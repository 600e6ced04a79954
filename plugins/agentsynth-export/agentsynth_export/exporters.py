"""Training-data exporters. Each streams EpisodeResults to a file in constant memory.

Every exporter takes the same selection parameters (in a run spec's ``export:`` entry or on
``agentsynth export``):

- ``filter``: ``passed`` (only episodes the checkers passed) or ``all``.
- ``min_reward``: drop records whose reward (judge ``reward`` dimension, a ``reward`` score,
  else 1/0 from the outcome) is below this.
- ``canary``: ``auto`` (records of test-split tasks carry the pack's canary string), ``always``
  or ``never``; ``canary_string`` overrides the string.
- ``include_test``: ``false`` (default): records of test-split tasks are left out, so a benchmark's
  tasks never become training data; ``true`` includes them, with a warning.
- ``redact``: redact emails, API keys, bearer tokens, phone numbers and IPs on the way out.
- ``dedup``: ``true`` or ``{exact, near, threshold, num_perm, ngram, scope}`` to drop duplicates.
- ``decontaminate``: a pack (name or path) or ``{pack, ngram, threshold, scope}``: drop records
  overlapping its tasks (and any record carrying a canary string).

Whatever the parameters, every string written goes through the kernel's secret redaction first
(:mod:`agentsynth_export.scrub`). An export with nothing to write is an error that says why, and
leaves no file (a temporary file beside the target is moved into place only when it holds records; a FIFO
or device such as ``/dev/stdout`` is written in place).

``path`` may be given in the spec entry (the engine passes it to :meth:`export`).
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import attrs
import msgspec

from agentsynth_kernel import (
    AgentsynthError,
    EpisodeResult,
    ToolCall,
    Trajectory,
    to_openai_messages,
)

from .common import (
    CANARY_MODES,
    FILTERS,
    canary_string,
    check_choice,
    reward,
    wants_canary,
)

_encoder = msgspec.json.Encoder()
FLUSH_BYTES = 1 << 20
log = logging.getLogger("agentsynth_export")


def _open_out(path: Path) -> Any:
    return open(path, "wb")


DEDUP_KEYS = ("exact", "near", "threshold", "num_perm", "ngram", "scope", "verify", "batch_size")
DECONTAM_KEYS = ("pack", "ngram", "threshold", "scope")


def _check_keys(owner: str, name: str, value: Any, allowed: tuple[str, ...]) -> None:
    from agentsynth_kernel import did_you_mean

    if value is None or isinstance(value, (bool, str)):
        return
    if not isinstance(value, dict):
        raise AgentsynthError(f"{owner}: {name}: expected true/false, a name or a mapping, got {value!r}")
    for key in value:
        if key not in allowed:
            raise AgentsynthError(f"{owner}: {name}.{key}: unknown key{did_you_mean(str(key), allowed)}")


@attrs.define(kw_only=True)
class BaseExporter:
    """Selection, redaction, dedup and canary handling shared by all formats."""

    format_name = "base"
    needs_trajectory = True

    path: str | None = None
    filter: str = "all"
    include_test: bool = False
    min_reward: float | None = None
    canary: str = "auto"
    canary_string: str = ""
    redact: bool = False
    dedup: bool | dict[str, Any] = False
    decontaminate: str | dict[str, Any] | None = None
    base_dir: Path | None = None
    stats: Counter[str] = attrs.field(factory=Counter, init=False)
    report: dict[str, Any] = attrs.field(factory=dict, init=False)
    # the secret scrub of the current export (its encoded() spares the jsonl exporter a second encode)
    scrubber: Any = attrs.field(default=None, init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        owner = f"exporter {self.format_name!r}"
        check_choice(owner, "filter", self.filter, FILTERS)
        check_choice(owner, "canary", self.canary, CANARY_MODES)
        if not isinstance(self.include_test, bool):
            raise AgentsynthError(f"{owner}: include_test: expected true or false, got {self.include_test!r}")
        if self.min_reward is not None and (isinstance(self.min_reward, bool) or not isinstance(self.min_reward, (int, float))):
            raise AgentsynthError(f"{owner}: min_reward: expected a number, got {self.min_reward!r}")
        _check_keys(owner, "dedup", self.dedup, DEDUP_KEYS)
        _check_keys(owner, "decontaminate", self.decontaminate, DECONTAM_KEYS)

    # --- pipeline ---------------------------------------------------------------------------------

    def canary_for(self, result: EpisodeResult) -> str | None:
        if not wants_canary(self.canary, result):
            return None
        return self.canary_string or canary_string(result)

    def select(self, results: Iterable[EpisodeResult]) -> Iterator[EpisodeResult]:
        """The records this exporter writes, after filter, reward, redaction, dedup, decontamination."""
        from .scrub import Scrubber

        self.scrubber = Scrubber(self.stats)
        stream = self.scrubber.scrub(self._select(results))
        redactor = None
        if self.redact:
            from .redact import Redactor

            redactor = Redactor()
            stream = self._redacted(stream, redactor)
        deduper = self._deduplicator()
        if deduper is not None:
            stream = deduper.filter(stream)
        yield from stream
        if redactor is not None:
            self.report["redacted"] = redactor.report()
        if deduper is not None:
            self.report["dedup"] = deduper.report()

    def _select(self, results: Iterable[EpisodeResult]) -> Iterator[EpisodeResult]:
        stats = self.stats
        passed_only = self.filter == "passed"
        min_reward = self.min_reward
        needs = self.needs_trajectory
        include_test = self.include_test
        for result in results:
            stats["read"] += 1
            if result.split == "test":
                if not include_test:
                    stats["test_split"] += 1
                    continue
                stats["test_split_included"] += 1
            if passed_only and result.status != "passed":
                stats["filtered"] += 1
                continue
            if min_reward is not None and reward(result) < min_reward:
                stats["below_min_reward"] += 1
                continue
            if needs and result.trajectory is None:
                stats["no_trajectory"] += 1
                continue
            yield result

    @staticmethod
    def _redacted(stream: Iterator[EpisodeResult], redactor: Any) -> Iterator[EpisodeResult]:
        for result in stream:
            if result.trajectory is not None:
                result = msgspec.structs.replace(
                    result, trajectory=redactor.trajectory(result.trajectory), error=redactor.text(result.error)
                )
            yield result

    def _deduplicator(self) -> Any:
        if not self.dedup and not self.decontaminate:
            return None
        from .dedup import Decontaminator, Deduplicator

        decon = None
        if self.decontaminate:
            opts = dict(self.decontaminate) if isinstance(self.decontaminate, dict) else {"pack": self.decontaminate}
            ref = opts.pop("pack", None)
            if not ref:
                raise AgentsynthError(f"exporter {self.format_name!r}: decontaminate: needs a pack (name or path)")
            if self.base_dir is not None and (self.base_dir / str(ref)).exists():
                ref = self.base_dir / str(ref)
            decon = Decontaminator.from_pack(ref, **opts)
        if self.dedup:
            opts = dict(self.dedup) if isinstance(self.dedup, dict) else {}
            return Deduplicator(decontaminator=decon, **opts)
        return Deduplicator(exact=False, near=False, decontaminator=decon)

    # --- the protocol ------------------------------------------------------------------------------

    def export(self, results: Iterable[EpisodeResult], path: Path | str | None = None) -> int:
        """Write the selected records to ``path`` (or the ``path`` given at construction)."""
        target = path if path is not None else self.path
        if target is None:
            raise AgentsynthError(f"exporter {self.format_name!r}: no output path")
        self.stats.clear()
        self.report.clear()
        try:
            written = self.write_target(self.select(results), Path(target))
        except OSError as exc:  # an unwritable path, a full disk
            raise AgentsynthError(f"{target}: cannot write the {self.format_name} export: {exc.strerror or exc}") from None
        self.stats["written"] = written
        included = self.stats["test_split_included"]
        if included:
            warning = (f"{target}: {included} record(s) of test-split tasks included (include_test): a model trained "
                       "on them has seen the benchmark" + ("" if self.canary == "never" else
                                                          "; they carry the pack's canary string"))
            self.report["warnings"] = [warning]
            log.warning("warning: %s", warning)
        return written

    def write_target(self, records: Iterator[EpisodeResult], target: Path) -> int:
        """Write to a temporary file beside ``target``, moved into place only when it holds a record.

        A FIFO or device target (``/dev/stdout``, ``/dev/null``) is written in place: renaming onto it
        would replace it by a regular file.
        """
        if target.is_dir():
            raise AgentsynthError(f"{target}: is a directory, expected a file path")
        if target.exists() and not target.is_file():
            # a FIFO or device (/dev/null, /dev/stdout): the rename would replace it by a regular file
            n = self.write(records, target)
            if n == 0:
                raise AgentsynthError(self.why_empty(target))
            return n
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        try:
            n = self.write(records, tmp)
            if n == 0:
                raise AgentsynthError(self.why_empty(target))
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        return n

    def write(self, records: Iterator[EpisodeResult], path: Path) -> int:
        raise NotImplementedError

    def why_empty(self, target: Path) -> str:
        """What left an export empty, from the selection counts, with the option that would change it."""
        s = self.stats
        if not s["read"]:
            return f"{target}: nothing to write (the run has no episodes); no file written"
        reasons = self.empty_reasons()
        dedup = self.report.get("dedup") or {}
        dropped = int(dedup.get("seen", 0)) - int(dedup.get("kept", 0))
        if dropped > 0:
            reasons.append(f"{dropped} dropped as duplicates or contaminated (dedup / decontaminate)")
        return (f"{target}: nothing to write, no file written: of {s['read']} episodes, "
                + "; ".join(reasons or ["none could be rendered"]))

    def empty_reasons(self) -> list[str]:
        s = self.stats
        reasons = []
        if s["test_split"]:
            reasons.append(f"{s['test_split']} of the test split (left out of training data; --include-test or "
                           "include_test: true to include them)")
        if s["filtered"]:
            reasons.append(f"{s['filtered']} did not pass (filter: passed; --filter all to include them)")
        if s["below_min_reward"]:
            reasons.append(f"{s['below_min_reward']} below min_reward {self.min_reward}")
        if s["no_trajectory"]:
            reasons.append(f"{s['no_trajectory']} have no trajectory (the episode errored)")
        if s["skipped_empty"]:
            reasons.append(f"{s['skipped_empty']} have no assistant turn")
        return reasons

    def summary(self) -> dict[str, Any]:
        return {"format": self.format_name, **dict(self.stats), **self.report}


class _LineExporter(BaseExporter):
    """One JSON object per line; subclasses render a record to a dict (or None to skip it)."""

    def row(self, result: EpisodeResult) -> dict[str, Any] | None:
        raise NotImplementedError

    def write(self, records: Iterator[EpisodeResult], path: Path) -> int:
        n = 0
        buf = bytearray()
        encode_into = _encoder.encode_into
        with _open_out(path) as fp:
            for result in records:
                row = self.row(result)
                if row is None:
                    self.stats["skipped_empty"] += 1
                    continue
                encode_into(row, buf, len(buf))
                buf.extend(b"\n")
                n += 1
                if len(buf) >= FLUSH_BYTES:
                    fp.write(buf)
                    buf.clear()
            fp.write(buf)
        return n


# --- jsonl -----------------------------------------------------------------------------------------------


@attrs.define(kw_only=True)
class JsonlExporter(BaseExporter):
    """The full EpisodeResult (trajectory, verdicts, scores, provenance) per line.

    Lines decode back with ``msgspec.json.decode(line, type=EpisodeResult)`` (or
    ``agentsynth_kernel.records.read_jsonl``); a canary, when present, is an extra
    ``"canary"`` key that the decoder ignores.
    """

    format_name = "jsonl"
    needs_trajectory = False

    def write(self, records: Iterator[EpisodeResult], path: Path) -> int:
        n = 0
        buf = bytearray()
        encode_into = _encoder.encode_into
        mode = self.canary
        suffixes: dict[str, bytes] = {}
        self.scrubber = None  # (one of an earlier export is not this one's)
        with _open_out(path) as fp:
            for result in records:
                # the scrub's screen encoded it already, when it passed it unchanged (select() is a generator:
                # its scrubber exists from the first record on)
                scrubber = self.scrubber
                data = scrubber.encoded(result) if scrubber is not None else None
                if data is None:
                    encode_into(result, buf, len(buf))
                else:
                    buf += data
                if mode != "never" and wants_canary(mode, result):
                    canary = self.canary_for(result) or ""
                    suffix = suffixes.get(canary)
                    if suffix is None:
                        suffix = suffixes[canary] = b',"canary":' + _encoder.encode(canary) + b"}\n"
                    # splice `,"canary":"..."` before the closing brace
                    del buf[-1]
                    buf.extend(suffix)
                else:
                    buf.extend(b"\n")
                n += 1
                if len(buf) >= FLUSH_BYTES:
                    fp.write(buf)
                    buf.clear()
            fp.write(buf)
        return n


# --- openai ----------------------------------------------------------------------------------------------


def _assistant_count(messages: list[dict[str, Any]]) -> int:
    return sum(1 for m in messages if m["role"] == "assistant")


@attrs.define(kw_only=True)
class OpenAIExporter(_LineExporter):
    """OpenAI chat fine-tuning lines: ``{"messages": [...], "tools": [...]}``.

    Assistant tool calls are parallel ``tool_calls`` with JSON-string ``arguments`` (or
    objects with ``arguments: object``, as some chat templates want), each followed by its
    ``tool`` result message. TRL's SFTTrainer reads the same shape (``messages`` + ``tools``).
    ``include_metadata`` adds ``task_id``/``status``/``reward``; ``weight_last`` sets
    ``weight: 0`` on every assistant message but the last (OpenAI's per-message weights).
    """

    format_name = "openai"
    filter: str = "passed"
    arguments: str = "string"
    include_metadata: bool = False
    include_tools: bool = True

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        check_choice("exporter 'openai'", "arguments", self.arguments, ("string", "object"))

    def messages(self, traj: Trajectory) -> list[dict[str, Any]]:
        msgs = to_openai_messages(traj)
        if self.arguments == "object":
            for m in msgs:
                for call in m.get("tool_calls") or ():
                    call["function"]["arguments"] = json.loads(call["function"]["arguments"])
        return msgs

    def row(self, result: EpisodeResult) -> dict[str, Any] | None:
        traj = result.trajectory
        assert traj is not None
        msgs = self.messages(traj)
        if not _assistant_count(msgs):
            return None
        row: dict[str, Any] = {"messages": msgs}
        if self.include_tools and traj.tools:
            row["tools"] = [t.to_openai() for t in traj.tools]
        if self.include_metadata:
            row.update(task_id=result.task_id, status=result.status, reward=reward(result))
        canary = self.canary_for(result)
        if canary:
            row["canary"] = canary
        return row


# --- sharegpt --------------------------------------------------------------------------------------------


def sharegpt_conversations(traj: Trajectory) -> list[dict[str, str]]:
    """ShareGPT turns: system / human / gpt / tool. Tool calls are Hermes-style ``<tool_call>`` blocks."""
    conv: list[dict[str, str]] = []
    for m in to_openai_messages(traj):
        role = m["role"]
        if role == "system":
            conv.append({"from": "system", "value": m["content"]})
        elif role == "user":
            conv.append({"from": "human", "value": m["content"]})
        elif role == "tool":
            conv.append({"from": "tool", "value": m["content"]})
        else:
            parts = [m["content"]] if m.get("content") else []
            for call in m.get("tool_calls") or ():
                fn = call["function"]
                body = {"name": fn["name"], "arguments": json.loads(fn["arguments"])}
                parts.append("<tool_call>\n" + json.dumps(body, ensure_ascii=False) + "\n</tool_call>")
            conv.append({"from": "gpt", "value": "\n".join(parts)})
    return conv


def parse_sharegpt_tool_calls(value: str) -> list[dict[str, Any]]:
    """The ``{"name", "arguments"}`` bodies of the ``<tool_call>`` blocks in a gpt turn."""
    out = []
    rest = value
    while "<tool_call>" in rest:
        _, _, rest = rest.partition("<tool_call>")
        body, _, rest = rest.partition("</tool_call>")
        out.append(json.loads(body))
    return out


@attrs.define(kw_only=True)
class ShareGPTExporter(_LineExporter):
    """ShareGPT lines ``{"conversations": [{"from", "value"}], "tools": "<json>"}`` (Axolotl, Unsloth,
    LLaMA-Factory). Roles: ``system``, ``human``, ``gpt``, ``tool``; a gpt turn's tool calls are
    ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks after its text."""

    format_name = "sharegpt"
    filter: str = "passed"

    def row(self, result: EpisodeResult) -> dict[str, Any] | None:
        traj = result.trajectory
        assert traj is not None
        conv = sharegpt_conversations(traj)
        if not any(t["from"] == "gpt" for t in conv):
            return None
        row: dict[str, Any] = {"conversations": conv}
        if traj.tools:
            row["tools"] = json.dumps([t.to_openai()["function"] for t in traj.tools], ensure_ascii=False)
        canary = self.canary_for(result)
        if canary:
            row["canary"] = canary
        return row


# --- ADP -------------------------------------------------------------------------------------------------

ADP_SCHEMA_VERSION = "1.2.0"


def adp_content(traj: Trajectory, final_reward: float | None = None) -> list[dict[str, Any]]:
    """Agent Data Protocol content: text observations, api actions and message actions."""
    content: list[dict[str, Any]] = []
    if traj.system_prompt:
        content.append({"class_": "text_observation", "content": traj.system_prompt, "source": "environment",
                        "name": "system"})
    user = traj.instruction
    if traj.initial_observation and traj.initial_observation != traj.instruction:
        user = f"{user}\n\n{traj.initial_observation}" if user else traj.initial_observation
    content.append({"class_": "text_observation", "content": user, "source": "user"})
    for step in traj.steps:
        action = step.action
        if isinstance(action, ToolCall):
            item: dict[str, Any] = {"class_": "api_action", "function": action.name, "kwargs": action.arguments}
        else:
            item = {"class_": "message_action", "content": action.content}
        item["description"] = ""
        if step.thought:
            item["reasoning_content"] = step.thought
        content.append(item)
        if isinstance(action, ToolCall):
            obs = step.observation
            content.append({"class_": "text_observation", "content": obs.content if obs else "",
                            "source": "environment", "name": action.name})
    if final_reward is not None:
        for item in reversed(content):
            if item["class_"] in ("api_action", "message_action"):
                item["reward"] = final_reward
                break
    return content


@attrs.define(kw_only=True)
class ADPExporter(_LineExporter):
    """Agent Data Protocol (neulab/agent-data-protocol, schema 1.2.0) trajectories:
    ``{"schema_version", "id", "content": [...typed steps...], "details": {...}}``.
    The episode's reward is put on the last action; task, status and provenance go in ``details``."""

    format_name = "adp"
    filter: str = "passed"

    def row(self, result: EpisodeResult) -> dict[str, Any] | None:
        traj = result.trajectory
        assert traj is not None
        r = reward(result)
        details: dict[str, Any] = {
            "task_id": result.task_id, "trial": result.trial, "seed": result.seed, "status": result.status,
            "reward": r, "split": result.split, "tools": [t.to_openai()["function"] for t in traj.tools],
            "provenance": result.provenance,
        }
        canary = self.canary_for(result)
        if canary:
            details["canary"] = canary
        return {
            "schema_version": ADP_SCHEMA_VERSION,
            "id": f"{result.task_id}#{result.trial}#{result.seed}",
            "content": adp_content(traj, r),
            "details": details,
        }


# --- DPO -------------------------------------------------------------------------------------------------


@attrs.define(kw_only=True)
class DPOExporter(_LineExporter):
    """Preference pairs from passing (chosen) vs failing (rejected) trials of the same task.

    Lines are TRL's conversational preference format: ``prompt`` (system + user messages),
    ``chosen`` and ``rejected`` (the assistant/tool continuation), plus ``margin`` (reward of
    chosen minus rejected), both rewards, ``task_id`` and ``tools``. Up to
    ``max_pairs_per_task`` pairs with the largest margins (> ``min_margin``) per task.

    Records are grouped by consecutive ``task_id`` (a run store yields them sorted), so memory
    holds one task's trials at a time. ``filter`` does not apply (both sides are needed).
    """

    format_name = "dpo"
    max_pairs_per_task: int = 4
    min_margin: float = 0.0

    def select(self, results: Iterable[EpisodeResult]) -> Iterator[EpisodeResult]:
        saved, self.filter = self.filter, "all"
        try:
            yield from super().select(results)
        finally:
            self.filter = saved

    def empty_reasons(self) -> list[str]:
        reasons = super().empty_reasons()
        if self.stats["tasks_without_pair"]:
            reasons.append(f"no task has both a passing and a failing trial ({self.stats['tasks_without_pair']} "
                           "task(s) only passed or only failed): run with --trials 2+ (trials: 2 or more) and a "
                           "policy that sometimes fails, or import traces of both outcomes")
        elif self.stats["no_margin"]:
            reasons.append(f"{self.stats['no_margin']} pair(s) with a margin <= min_margin {self.min_margin}")
        return reasons

    def write(self, records: Iterator[EpisodeResult], path: Path) -> int:
        n = 0
        seen_tasks: set[str] = set()
        with _open_out(path) as fp:
            for task_id, group in itertools.groupby(records, key=lambda r: r.task_id):
                if task_id in seen_tasks:
                    self.stats["unsorted_groups"] += 1
                seen_tasks.add(task_id)
                for row in self.pairs(list(group)):
                    fp.write(_encoder.encode(row) + b"\n")
                    n += 1
        return n

    def pairs(self, group: list[EpisodeResult]) -> Iterator[dict[str, Any]]:
        good = [(reward(r), r) for r in group if r.status == "passed"]
        bad = [(reward(r), r) for r in group if r.status == "failed"]
        if not good or not bad:
            self.stats["tasks_without_pair"] += 1
            return
        candidates = sorted(
            ((rg - rb, i, j) for i, (rg, _) in enumerate(good) for j, (rb, _) in enumerate(bad) if rg - rb > self.min_margin),
            key=lambda c: -c[0],
        )
        if not candidates:
            self.stats["no_margin"] += len(good) * len(bad)
        for margin, i, j in candidates[: self.max_pairs_per_task]:
            (rg, chosen), (rb, rejected) = good[i], bad[j]
            c_msgs = to_openai_messages(chosen.trajectory)  # type: ignore[arg-type]
            r_msgs = to_openai_messages(rejected.trajectory)  # type: ignore[arg-type]
            cut_c = _prompt_len(c_msgs)
            cut_r = _prompt_len(r_msgs)
            if cut_c >= len(c_msgs) or cut_r >= len(r_msgs):
                self.stats["skipped_empty"] += 1
                continue
            row: dict[str, Any] = {
                "prompt": c_msgs[:cut_c], "chosen": c_msgs[cut_c:], "rejected": r_msgs[cut_r:],
                "margin": margin, "chosen_reward": rg, "rejected_reward": rb, "task_id": chosen.task_id,
            }
            traj = chosen.trajectory
            if traj is not None and traj.tools:
                row["tools"] = [t.to_openai() for t in traj.tools]
            canary = self.canary_for(chosen)
            if canary:
                row["canary"] = canary
            yield row


def _prompt_len(messages: list[dict[str, Any]]) -> int:
    i = 0
    while i < len(messages) and messages[i]["role"] in ("system", "user"):
        i += 1
    return i


# --- Parquet / HF ------------------------------------------------------------------------------------------

PARQUET_SCHEMA_VERSION = "1"


def parquet_schema() -> Any:
    """The stable Arrow schema of ``parquet`` and ``hf`` exports (version ``PARQUET_SCHEMA_VERSION``).

    ``messages`` is OpenAI-shaped (usable with ``tokenizer.apply_chat_template``); JSON-valued
    fields whose shape varies (tools, scores, provenance, metadata) are JSON strings;
    ``record`` is the full EpisodeResult as JSON, for an exact round trip.
    """
    import pyarrow as pa

    s = pa.string()
    call = pa.struct([("id", s), ("type", s), ("function", pa.struct([("name", s), ("arguments", s)]))])
    message = pa.struct([("role", s), ("content", s), ("tool_calls", pa.list_(call)), ("tool_call_id", s)])
    verdict = pa.struct([("checker", s), ("passed", pa.bool_()), ("score", pa.float64()), ("detail", s)])
    fields = [
        ("id", s), ("task_id", s), ("trial", pa.int64()), ("seed", pa.int64()), ("status", s),
        ("passed", pa.bool_()), ("reward", pa.float64()), ("split", s), ("tier", s),
        ("instruction", s), ("system_prompt", s), ("messages", pa.list_(message)), ("tools", s),
        ("final_answer", s), ("num_steps", pa.int32()), ("num_tool_calls", pa.int32()),
        ("verdicts", pa.list_(verdict)), ("scores", s), ("error", s), ("error_kind", s),
        ("duration_s", pa.float64()), ("prompt_tokens", pa.int64()), ("completion_tokens", pa.int64()),
        ("cost_usd", pa.float64()), ("run_id", s), ("pack", s), ("pack_hash", s), ("provenance", s),
        ("metadata", s), ("canary", s), ("schema_version", pa.int32()), ("record", s),
    ]
    return pa.schema(fields, metadata={"agentsynth.schema": f"episode-v{PARQUET_SCHEMA_VERSION}"})


def _dumps(value: Any) -> str:
    return _encoder.encode(value).decode()


@attrs.define(kw_only=True)
class ParquetExporter(BaseExporter):
    """One row per episode with a fixed Arrow schema (see :func:`parquet_schema`), written in
    row groups of ``batch_size`` with pyarrow's ParquetWriter (``compression``: zstd)."""

    format_name = "parquet"
    needs_trajectory = False
    batch_size: int = 1000
    compression: str = "zstd"
    include_record: bool = True

    def to_row(self, result: EpisodeResult) -> dict[str, Any]:
        traj = result.trajectory
        msgs = to_openai_messages(traj) if traj is not None else []
        prov = result.provenance or {}
        return {
            "id": f"{result.task_id}#{result.trial}#{result.seed}",
            "task_id": result.task_id, "trial": result.trial, "seed": result.seed, "status": result.status,
            "passed": result.status == "passed", "reward": reward(result), "split": result.split,
            "tier": result.tier,
            "instruction": traj.instruction if traj else "", "system_prompt": traj.system_prompt if traj else "",
            "messages": msgs,
            "tools": _dumps([t.to_openai() for t in traj.tools]) if traj else "[]",
            "final_answer": traj.final_answer if traj else None,
            "num_steps": len(traj.steps) if traj else 0,
            "num_tool_calls": sum(isinstance(s.action, ToolCall) for s in traj.steps) if traj else 0,
            "verdicts": [{"checker": v.checker, "passed": v.passed, "score": v.score, "detail": v.detail}
                         for v in result.verdicts],
            "scores": _dumps(result.scores), "error": result.error, "error_kind": result.error_kind,
            "duration_s": result.duration_s, "prompt_tokens": result.usage.prompt_tokens,
            "completion_tokens": result.usage.completion_tokens, "cost_usd": result.usage.cost_usd,
            "run_id": str(prov.get("run_id", "")), "pack": str(prov.get("pack", "")),
            "pack_hash": str(prov.get("pack_hash", "")), "provenance": _dumps(prov),
            "metadata": _dumps(traj.metadata) if traj else "{}", "canary": self.canary_for(result),
            "schema_version": result.schema_version,
            "record": _dumps(result) if self.include_record else None,
        }

    def write(self, records: Iterator[EpisodeResult], path: Path) -> int:
        import pyarrow as pa
        import pyarrow.parquet as pq

        schema = parquet_schema()
        n = 0
        rows: list[dict[str, Any]] = []
        with pq.ParquetWriter(str(path), schema, compression=self.compression) as writer:
            for result in records:
                rows.append(self.to_row(result))
                if len(rows) >= self.batch_size:
                    writer.write_batch(pa.RecordBatch.from_pylist(rows, schema=schema))
                    n += len(rows)
                    rows = []
            if rows or n == 0:
                writer.write_batch(pa.RecordBatch.from_pylist(rows, schema=schema))
                n += len(rows)
        return n


@attrs.define(kw_only=True)
class HFExporter(ParquetExporter):
    """A ``datasets.Dataset`` saved with ``save_to_disk`` (load with ``datasets.load_from_disk``).

    Same columns as ``parquet``. Rows stream into a temporary Parquet file, which ``datasets``
    converts to its memory-mapped Arrow cache; nothing is held in memory. An existing output
    directory is replaced only if it is empty or an earlier ``save_to_disk`` result.
    """

    format_name = "hf"

    def write_target(self, records: Iterator[EpisodeResult], path: Path) -> int:
        if path.exists():
            if path.is_file():
                raise AgentsynthError(f"{path}: exists and is a file; an hf export is a directory")
            entries = list(path.iterdir())
            if entries and not (path / "dataset_info.json").exists():
                raise AgentsynthError(f"{path}: directory is not empty and is not a saved dataset; refusing to replace it")
        path.parent.mkdir(parents=True, exist_ok=True)
        import datasets

        with tempfile.TemporaryDirectory(prefix="agentsynth-hf-", dir=path.parent) as tmp:
            parquet = Path(tmp) / "data.parquet"
            n = self.write(records, parquet)
            if n == 0:
                raise AgentsynthError(self.why_empty(path))
            progress = datasets.is_progress_bar_enabled()
            datasets.disable_progress_bars()
            try:
                ds = datasets.Dataset.from_parquet(str(parquet), cache_dir=str(Path(tmp) / "cache"))
                ds.info.description = "agentsynth episodes (agentsynth-export hf, schema episode-v" + PARQUET_SCHEMA_VERSION + ")"
                staging = Path(tmp) / "dataset"
                ds.save_to_disk(str(staging))
                del ds
            finally:
                if progress:
                    datasets.enable_progress_bars()
            if path.exists():
                shutil.rmtree(path)
            shutil.move(str(staging), str(path))
        return n


EXPORTERS: dict[str, tuple[type[BaseExporter], str]] = {
    "jsonl": (JsonlExporter, "Full episode records (trajectory, verdicts, provenance) as JSON lines"),
    "openai": (OpenAIExporter, "OpenAI/TRL chat fine-tuning messages with tool_calls and tool results"),
    "sharegpt": (ShareGPTExporter, "ShareGPT conversations (human/gpt/tool) for Axolotl, Unsloth, LLaMA-Factory"),
    "adp": (ADPExporter, "Agent Data Protocol trajectories (typed api/message actions, observations)"),
    "dpo": (DPOExporter, "DPO preference pairs: passing vs failing trials of the same task, with margin"),
    "parquet": (ParquetExporter, "Parquet with a stable Arrow schema (pyarrow)"),
    "hf": (HFExporter, "A Hugging Face datasets.Dataset saved to disk (load_from_disk)"),
}


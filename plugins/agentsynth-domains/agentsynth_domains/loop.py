"""The autosynth loop, per source item of a domain, durable in the run store.

One round: the **challenger** writes a candidate from the item (and the last round's feedback);
the domain **validates** it; an **auditor** checks its quality; N **weak** and N **strong**
attempts run in parallel, each scored as soon as it lands (``verify`` when the domain can check
the answer, else the **judge** against the rubric); the **acceptance** mode decides; a rejected
candidate gets **reflector** feedback for the next round, up to ``max_rounds``.

Solvers get the very same messages whoever they are (the weak/strong split is only the model).

Durability: every finished round is one ``autosynth_round`` event, and a finished item one
``autosynth_item`` event written in the same transaction as its last round, in the kernel's
:class:`~agentsynth_kernel.store.RunStore`. A kill -9 loses at most the rounds in flight; a rerun
on the same run directory skips finished items and continues unfinished ones after their last
stored round (with its feedback), so nothing accepted is lost or duplicated.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import socket
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import attrs

from agentsynth_kernel import AgentsynthError, BudgetExceeded, verifiable_gate

from .domains import parse_json_object
from .pii import scrub
from .settings import ACCEPTANCE, LLMSpec, Settings

SYSTEM = {
    "challenger": "You write hard, well-posed tasks for evaluating and training AI models.",
    "solver": "You are a careful problem solver.",
    "judge": "You are a strict, fair grader.",
    "auditor": "You review tasks for quality before they are used.",
    "reflector": "You explain why a generated task was rejected and how to make the next one better.",
    "loop_judge": "You decide whether a generated task separates strong solvers from weak ones.",
    "mutator": "You improve the instructions of a data-generation pipeline, one small change at a time.",
}


JSON_ROLES = ("challenger", "judge", "auditor", "loop_judge", "mutator")


def system_prompt(settings: Settings, role: str) -> str:
    rules = settings.harness.rules.get(role) or []
    text = SYSTEM[role]
    if rules:
        text += "\nRules:\n" + "\n".join(f"- {r}" for r in rules)
    return text


class ItemFailed(AgentsynthError):
    """A request of this item failed for good (provider error): the item is not finished; a rerun retries it."""


@attrs.define
class Meter:
    requests: int = 0
    tokens: int = 0


@attrs.define
class RoundResult:
    round: int
    status: str  # accepted | rejected
    reason: str = ""
    detail: str = ""
    candidate: dict[str, Any] | None = None
    scores: dict[str, Any] = attrs.field(factory=dict)
    attempts: list[dict[str, Any]] = attrs.field(factory=list)
    rationale: str = ""
    feedback: str = ""
    requests: int = 0
    short_circuited: bool = False


@attrs.define
class Report:
    domain: str
    acceptance: str
    planned: int = 0
    done: int = 0
    restored: int = 0
    accepted: int = 0
    rejected: Counter[str] = attrs.field(factory=Counter)
    rounds: Counter[str] = attrs.field(factory=Counter)
    stages: Counter[str] = attrs.field(factory=Counter)
    requests: int = 0
    failed: list[str] = attrs.field(factory=list)
    pii: Counter[str] = attrs.field(factory=Counter)
    stopped: str = ""
    duration_s: float = 0.0
    output: str | None = None
    run_dir: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "generator": "autosynth", "domain": self.domain, "acceptance": self.acceptance,
            "planned_items": self.planned, "done_items": self.done, "restored_items": self.restored,
            "accepted": self.accepted, "rejected": dict(sorted(self.rejected.items())),
            "rounds": dict(sorted(self.rounds.items())), "stages": dict(sorted(self.stages.items())),
            "llm_requests": self.requests,
            "llm_requests_per_accepted": round(self.requests / self.accepted, 3) if self.accepted else None,
            "failed_items": len(self.failed), "errors": self.failed[:20], "pii": dict(sorted(self.pii.items())),
            "stopped": self.stopped, "duration_s": round(self.duration_s, 3), "output": self.output,
            "run_dir": self.run_dir,
        }


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def rubric_score(answer: dict[str, Any], rubric: list[dict[str, Any]] | None, cap: float) -> float:
    """A judge's score in [0, 1]: the weighted share of rubric criteria met (weights capped at
    ``cap``, non-positive ones left out), else its ``score``."""
    criteria = answer.get("criteria")
    if rubric and isinstance(criteria, list) and criteria:
        met: dict[int, bool] = {}
        for i, entry in enumerate(criteria):
            if isinstance(entry, dict):
                index = entry.get("index", i)
                if isinstance(index, int) and not isinstance(index, bool):
                    met[index] = bool(entry.get("met"))
        weights = []
        for i, c in enumerate(rubric):
            w = c.get("weight", 1) if isinstance(c, dict) else 1
            w = float(w) if isinstance(w, (int, float)) and not isinstance(w, bool) else 1.0
            if w > 0:
                weights.append((i, min(w, cap)))
        total = sum(w for _, w in weights)
        if total > 0:
            return sum(w for i, w in weights if met.get(i)) / total
    score = answer.get("score")
    if isinstance(score, (int, float)) and not isinstance(score, bool):
        return min(1.0, max(0.0, float(score)))
    raise ValueError("the judge's answer has neither 'criteria' nor a numeric 'score'")


def decide(settings: Settings, mode: str, weak: list[float], strong: list[float] | None,
           ) -> tuple[bool, str, str, dict[str, Any]]:
    """(accepted, reason, rationale, scores) for rubric and verifiable modes; ``strong`` None
    means the weak gate is being checked alone (short-circuit)."""
    t = settings.thresholds
    n = settings.attempts
    scores: dict[str, Any] = {"weak": weak, "weak_avg": round(_mean(weak), 4), "weak_max": max(weak, default=0.0)}
    if strong is not None:
        scores.update({"strong": strong, "strong_avg": round(_mean(strong), 4),
                       "gap": round(_mean(strong) - _mean(weak), 4)})
    if mode == "verifiable":
        weak_ok = sum(s >= t.pass_score for s in weak)
        scores["weak_correct"] = weak_ok
        strong_ok = None if strong is None else sum(s >= t.pass_score for s in strong)
        if strong_ok is not None and weak_ok <= t.weak_correct_max * n / 4:
            scores["strong_correct"] = strong_ok
        accepted, reason, rationale = verifiable_gate(weak_ok, strong_ok, n, weak_correct_max=t.weak_correct_max,
                                                      strong_correct_min=t.strong_correct_min)
        return accepted, reason, rationale, scores
    weak_avg, weak_max = _mean(weak), max(weak, default=0.0)
    if weak_avg > t.weak_avg_max:
        return False, "weak_too_strong", f"weak average {weak_avg:.2f} > {t.weak_avg_max}", scores
    if weak_max > t.weak_max_max:
        return False, "weak_too_strong", f"weak best {weak_max:.2f} > {t.weak_max_max}", scores
    if strong is None:
        return True, "", f"weak average {weak_avg:.2f}, best {weak_max:.2f}", scores
    strong_avg = _mean(strong)
    if strong_avg < t.strong_avg_min:
        return False, "strong_too_weak", f"strong average {strong_avg:.2f} < {t.strong_avg_min}", scores
    if strong_avg >= t.strong_avg_max:
        return False, "too_easy", f"strong average {strong_avg:.2f} >= {t.strong_avg_max} (saturated)", scores
    gap = strong_avg - weak_avg
    if gap < t.min_gap:
        return False, "gap_too_small", f"gap {gap:.2f} < {t.min_gap}", scores
    return True, "", (f"rubric: weak average {weak_avg:.2f} (<= {t.weak_avg_max}), best {weak_max:.2f} "
                      f"(<= {t.weak_max_max}); strong average {strong_avg:.2f} in [{t.strong_avg_min}, "
                      f"{t.strong_avg_max}); gap {gap:.2f} (>= {t.min_gap}); quality audit passed"), scores


class Loop:
    """The loop over one domain with one harness; ``run_item`` is one source item's rounds."""

    def __init__(self, settings: Settings, domain: Any, client: Any) -> None:
        self.settings, self.domain, self.client = settings, domain, client
        mode = settings.acceptance or getattr(domain, "acceptance", None) or "rubric"
        if mode not in ACCEPTANCE:
            raise AgentsynthError(f"domain {settings.domain}: acceptance: expected one of {', '.join(ACCEPTANCE)}, "
                                  f"got {mode!r}")
        self.mode: str = mode
        self.cap = float(getattr(domain, "max_weight", 3.0))

    async def ask(self, spec: LLMSpec, role: str, prompt: str, meter: Meter, *, salt: str,
                  temperature: float | None = None, schema: dict[str, Any] | None = None) -> str:
        messages = [{"role": "system", "content": system_prompt(self.settings, role)},
                    {"role": "user", "content": prompt}]
        from agentsynth_kernel import LLMError

        extra: dict[str, Any] = {}
        json_mode = spec.json_mode if spec.json_mode is not None else spec.model.split("/")[0] == "local"
        if json_mode and schema is not None:  # constrained decoding where the server supports it
            extra["response_format"] = {"type": "json_schema", "json_schema": {"name": "candidate", "schema": schema}}
        elif json_mode and role in JSON_ROLES:
            extra["response_format"] = {"type": "json_object"}
        try:
            response = await self.client.complete(
                messages, model=spec.model, api_base=spec.api_base, api_key_env=spec.api_key_env,
                temperature=spec.temperature if temperature is None else temperature, max_tokens=spec.max_tokens,
                cache_salt=salt, **extra)
        except LLMError as exc:
            raise ItemFailed(f"{role} ({spec.model}): {exc}") from None
        if not response.cached:
            meter.requests += 1
            meter.tokens += response.usage.prompt_tokens + response.usage.completion_tokens
        return response.content or ""

    async def attempt(self, who: str, i: int, candidate: dict[str, Any], salt: str, meter: Meter) -> dict[str, Any]:
        """One solver attempt, scored as soon as it lands."""
        s = self.settings
        spec = s.weak if who == "weak" else s.strong
        knob = s.harness.knobs.get("solver_temperature")
        response = await self.ask(spec, "solver", self.domain.solver_prompt(candidate), meter,
                                  salt=f"{salt}:attempt{i}", temperature=knob)
        verdict = self.domain.verify(candidate, response) if self.mode != "rubric" else None
        if verdict is not None:
            return {"who": who, "i": i, "score": 1.0 if verdict else 0.0, "by": "verify", "response": response}
        answer = await self.ask(s.judge, "judge", self.domain.judge_prompt(candidate, response), meter,
                                salt=f"{salt}:{who}:judge{i}", temperature=0.0)
        try:
            parsed = parse_json_object(answer)
            score = rubric_score(parsed, candidate.get("rubric"), self.cap)
            note = str(parsed.get("rationale", ""))[:300]
        except ValueError as exc:
            score, note = 0.0, f"unreadable judge answer: {exc}"
        return {"who": who, "i": i, "score": round(score, 4), "by": "judge", "response": response, "note": note}

    async def attempts(self, who: str, candidate: dict[str, Any], salt: str, meter: Meter) -> list[dict[str, Any]]:
        return list(await asyncio.gather(*(self.attempt(who, i, candidate, salt, meter)
                                           for i in range(self.settings.attempts))))

    async def run_round(self, item: dict[str, Any], number: int, feedback: str, salt: str) -> RoundResult:
        meter = Meter()
        salt = f"{salt}:r{number}"
        result = RoundResult(number, "rejected")
        try:
            return await self._round(item, number, feedback, salt, meter, result)
        finally:
            result.requests = meter.requests

    async def _round(self, item: dict[str, Any], number: int, feedback: str, salt: str, meter: Meter,
                     result: RoundResult) -> RoundResult:
        s = self.settings
        text = await self.ask(s.challenger, "challenger", self.domain.generation_prompt(item, feedback), meter,
                              salt=f"{salt}:challenger", temperature=s.harness.knobs.get("challenger_temperature"),
                              schema=getattr(self.domain, "candidate_schema", None))
        try:
            parsed = parse_json_object(text)
        except ValueError:
            result.reason = "invalid_candidate"
            result.detail = f"the challenger's answer holds no JSON object: {text[:200]!r}"
            result.feedback = "Your answer was not a JSON object in the requested format."
            return result
        candidate = {**parsed, **{k: v for k, v in item.items() if k != "id"}, "item": item["id"]}
        result.candidate = candidate
        problems = list(self.domain.validate(candidate))
        if problems:
            result.reason, result.detail = "invalid_candidate", "; ".join(problems)
            result.feedback = "The task was invalid: " + "; ".join(problems)
            return result
        if s.audit:
            answer = await self.ask(s.auditor, "auditor", self.domain.audit_prompt(candidate), meter,
                                    salt=f"{salt}:audit", temperature=0.0)
            try:
                audit = parse_json_object(answer)
                passed, why = audit.get("pass") is True, str(audit.get("reason", ""))
            except ValueError:
                passed, why = False, "the auditor's answer holds no JSON object"
            if not passed:
                result.reason, result.detail = "audit_failed", why
                result.feedback = f"The quality audit failed: {why}"
                return result
        if s.short_circuit_strong:
            weak = await self.attempts("weak", candidate, salt, meter)
            result.attempts = weak
            ok, reason, why, scores = (decide(s, self.mode, [a["score"] for a in weak], None)
                                       if self.mode != "judge" else (True, "", "", {}))
            if not ok:
                result.reason, result.detail, result.scores, result.short_circuited = reason, why, scores, True
                result.feedback = await self.reflect(candidate, reason, why, scores, meter, salt)
                return result
            strong = await self.attempts("strong", candidate, salt, meter)
        else:
            weak, strong = await asyncio.gather(self.attempts("weak", candidate, salt, meter),
                                                self.attempts("strong", candidate, salt, meter))
        result.attempts = [*weak, *strong]
        weak_scores, strong_scores = [a["score"] for a in weak], [a["score"] for a in strong]
        if self.mode == "judge":
            return await self.judge_decision(candidate, weak_scores, strong_scores, meter, salt, result)
        ok, reason, why, scores = decide(s, self.mode, weak_scores, strong_scores)
        result.scores, result.rationale = scores, why
        if ok:
            result.status = "accepted"
            return result
        result.reason, result.detail = reason, why
        result.feedback = await self.reflect(candidate, reason, why, scores, meter, salt)
        return result

    async def judge_decision(self, candidate: dict[str, Any], weak: list[float], strong: list[float], meter: Meter,
                             salt: str, result: RoundResult) -> RoundResult:
        scores = {"weak": weak, "strong": strong, "weak_avg": round(_mean(weak), 4),
                  "strong_avg": round(_mean(strong), 4), "gap": round(_mean(strong) - _mean(weak), 4)}
        result.scores = scores
        pattern = "\n".join(f"attempt {i}: solver A {w:.2f}, solver B {b:.2f}" for i, (w, b) in enumerate(zip(weak, strong, strict=False)))
        prompt = (f"A generated task:\n{json.dumps(_public(candidate), ensure_ascii=False, indent=1)}\n\n"
                  f"Scores of a weaker solver (A) and a stronger solver (B), per attempt:\n{pattern}\n\n"
                  "Keep the task only if it clearly separates B from A and is itself sound.\n"
                  'Answer with JSON only: {"decision": "accept"|"improve"|"reject", "rationale": "...", '
                  '"suggestion": "how the next round should change the task"}')
        answer = await self.ask(self.settings.loop_judge, "loop_judge", prompt, meter, salt=f"{salt}:loop_judge",
                                temperature=0.0)
        try:
            verdict = parse_json_object(answer)
        except ValueError:
            verdict = {"decision": "reject", "rationale": "the loop judge's answer holds no JSON object"}
        decision = str(verdict.get("decision", "reject")).lower()
        result.rationale = f"judge: {verdict.get('rationale', '')}".strip()
        if decision == "accept":
            result.status = "accepted"
        elif decision == "improve":
            result.reason, result.detail = "judge_improve", str(verdict.get("rationale", ""))
            result.feedback = str(verdict.get("suggestion") or verdict.get("rationale") or "")
        else:
            result.reason, result.detail = "judge_rejected", str(verdict.get("rationale", ""))
            result.feedback = str(verdict.get("suggestion") or "")
        return result

    async def reflect(self, candidate: dict[str, Any], reason: str, why: str, scores: dict[str, Any], meter: Meter,
                      salt: str) -> str:
        plain = f"The task was rejected ({reason}: {why})."
        if self.settings.reflector is None:
            return plain
        prompt = (f"A generated task was rejected.\nTask:\n{json.dumps(_public(candidate), ensure_ascii=False, indent=1)}\n"
                  f"Reason: {reason}: {why}\nScores: {json.dumps(scores)}\n\n"
                  "In two or three sentences, say how the next task should change to be accepted.")
        text = await self.ask(self.settings.reflector, "reflector", prompt, meter, salt=f"{salt}:reflector",
                              temperature=0.0)
        return f"{plain} {text.strip()}".strip()

    def record(self, item: dict[str, Any], rounds: list[RoundResult], requests: int) -> dict[str, Any]:
        """The SFT-ready record of an accepted item: the solver prompt and the best strong attempt."""
        last = rounds[-1]
        assert last.candidate is not None
        strong = [a for a in last.attempts if a["who"] == "strong"]
        best = max(strong, key=lambda a: (a["score"], -a["i"]))
        return {
            "messages": [{"role": "user", "content": self.domain.solver_prompt(last.candidate)},
                         {"role": "assistant", "content": best["response"]}],
            "metadata": {
                "domain": self.settings.domain, "item": item["id"], "round": last.round, "acceptance": self.mode,
                "rationale": last.rationale, "scores": last.scores, "candidate": _public(last.candidate),
                "requests": requests, "rejected_rounds": [{"round": r.round, "reason": r.reason, "detail": r.detail}
                                                          for r in rounds[:-1]],
                "models": {"challenger": self.settings.challenger.model, "weak": self.settings.weak.model,
                           "strong": self.settings.strong.model, "judge": self.settings.judge.model},
            },
        }


def _public(candidate: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in candidate.items() if k not in ("chunk",)}


def item_key(item: dict[str, Any]) -> str:
    return str(item["id"])


# --- the run ---------------------------------------------------------------------------------------

ProgressFn = Callable[[str, dict[str, Any]], None]


def _fingerprint(settings: Settings) -> str:
    data = attrs.asdict(settings)
    for key in ("concurrency", "limit", "out", "base_dir", "cache", "mutator", "metaopt"):
        data.pop(key, None)
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


def make_client(settings: Settings, store: Any, budget: Any) -> Any:
    """The run's LLM client (kernel ``client_for``: budget with earlier sessions' spend, cache)."""
    from agentsynth_kernel import client_for

    run = SimpleNamespace(services={}, spec=SimpleNamespace(budget=budget), journal=store, spent=None)
    return client_for(run, cache=settings.cache)


async def run_loop(settings: Settings, domain: Any, *, client: Any, store: Any = None,
                   items: list[dict[str, Any]] | None = None, on_progress: ProgressFn | None = None,
                   keep: list[dict[str, Any]] | None = None) -> Report:
    """Run every item (``items`` or the domain's), ``concurrency`` at a time; accepted records go
    into ``store`` (if any) and ``keep`` (if given) as they are made."""
    started = time.perf_counter()
    loop = Loop(settings, domain, client)
    report = Report(settings.domain, loop.mode)
    source = list(items if items is not None else domain.items())
    if settings.limit is not None:
        source = source[: settings.limit]
    report.planned = len(source)
    done: set[str] = set()
    partial: dict[str, list[RoundResult]] = {}
    if store is not None:
        fingerprint = _fingerprint(settings)
        old = store.get_meta("autosynth")
        if old is None and (store.get_meta("spec") is not None or store.get_meta("synth") is not None):
            raise AgentsynthError(f"{store.run_dir}: holds another kind of run; use a new --run-dir")
        if old is not None and old.get("fingerprint") != fingerprint:
            raise AgentsynthError(f"{store.run_dir}: holds an autosynth run with other settings "
                                  f"(domain {old.get('domain')!r}); use a new --run-dir or the same spec to continue it")
        with store.transaction():
            if old is None:
                store.set_meta("run_id", f"autosynth-{settings.domain}-{fingerprint}")
                store.set_meta("created_at", time.time())
            store.set_meta("autosynth", {"domain": settings.domain, "fingerprint": fingerprint,
                                         "acceptance": loop.mode})
            store.set_meta("made_by", f"generator autosynth (domain {settings.domain})")
            store.set_meta("planned", len(source))
            store.set_meta("pack", {"id": f"domain:{settings.domain}"})  # what `agentsynth status` shows
        for _, kind, data in store.events():
            if kind == "autosynth_round":
                partial.setdefault(data["item"], []).append(RoundResult(**data["round"]))
                report.requests += int(data["round"].get("requests", 0))
            elif kind == "autosynth_item":
                done.add(data["item"])
                if data["status"] == "accepted":
                    report.accepted += 1
                elif data["status"] == "rejected":
                    report.rejected[data["reason"]] += 1
                if keep is not None and data.get("record"):
                    keep.append(data["record"])
        for rounds in partial.values():
            for r in rounds:
                report.rounds[r.reason or r.status] += 1
        report.restored = sum(1 for it in source if item_key(it) in done)
        store.event("run_started", pid=os.getpid(), host=socket.gethostname(), generator="autosynth")
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    for it in source:
        if item_key(it) not in done:
            queue.put_nowait(it)

    def commit(kind: str, **data: Any) -> None:
        if store is not None:
            with store.transaction():
                for event in data.pop("_rounds", []):
                    store.event("autosynth_round", **event)
                store.event(kind, **data)

    async def one(item: dict[str, Any]) -> None:
        key = item_key(item)
        rounds = list(partial.get(key, []))
        item_requests = sum(r.requests for r in rounds)
        while len(rounds) < settings.max_rounds:
            feedback = rounds[-1].feedback if rounds else ""
            result = await loop.run_round(item, len(rounds) + 1, feedback, key)
            rounds.append(result)
            item_requests += result.requests
            report.requests += result.requests
            report.rounds[result.reason or result.status] += 1
            report.stages["challenger"] += 1
            if result.reason != "invalid_candidate" and result.candidate is not None:
                report.stages["valid"] += 1
                if result.reason != "audit_failed":
                    report.stages["audited"] += 1
                    report.stages["solved"] += 1
                    report.stages["strong_skipped"] += result.short_circuited
            round_event = {"item": key, "round": attrs.asdict(result)}
            if settings.pii != "off":  # what is written to the run directory is scrubbed too
                round_event = scrub(round_event)[0]
            if result.status == "accepted":
                record: dict[str, Any] | None = loop.record(item, rounds, item_requests)
                status, reason = "accepted", ""
                if settings.pii != "off":
                    cleaned, kinds = scrub(record)
                    assert record is not None
                    report.pii.update(kinds)
                    if kinds and settings.pii == "drop":
                        status, reason, record = "rejected", "pii_dropped", None
                    elif kinds:
                        record = cleaned
                        cleaned["metadata"]["pii_masked"] = kinds
                if status == "accepted":
                    report.accepted += 1
                    if keep is not None and record is not None:
                        keep.append(record)
                else:
                    report.rejected[reason] += 1
                commit("autosynth_item", _rounds=[round_event], item=key, status=status, reason=reason,
                       record=record, requests=item_requests)
                report.done += 1
                return
            last = len(rounds) >= settings.max_rounds
            if last:
                report.rejected[result.reason] += 1
                report.done += 1
                commit("autosynth_item", _rounds=[round_event], item=key, status="rejected", reason=result.reason,
                       reasons=[r.reason for r in rounds], requests=item_requests)
            else:
                commit("autosynth_round_done", _rounds=[round_event], item=key, round=result.round)
            if on_progress is not None:
                on_progress("round", {"item": key, "round": result.round, "reason": result.reason,
                                      "detail": result.detail})

    async def worker() -> None:
        while not report.stopped:
            try:
                item = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            try:
                await one(item)
            except BudgetExceeded as exc:
                report.stopped = f"budget: {exc}"
                return
            except ItemFailed as exc:
                report.failed.append(f"{item_key(item)}: {exc}")
                if store is not None:
                    store.event("autosynth_failed", item=item_key(item), error=str(exc))
            if on_progress is not None:
                on_progress("item", {"item": item_key(item), "report": report})

    try:
        await asyncio.gather(*(worker() for _ in range(max(1, min(settings.concurrency, queue.qsize() or 1)))))
    finally:
        report.duration_s = time.perf_counter() - started
        if store is not None:
            store.set_meta("status_lines", [
                f"items: {report.done + report.restored} of {report.planned} done · accepted {report.accepted}",
                f"rejected: {', '.join(f'{k} {v}' for k, v in sorted(report.rejected.items())) or 'none'}",
                f"LLM requests: {report.requests}"])
            store.event("run_finished", stopped=report.stopped, episodes=report.accepted, interrupted=False)
    return report


def accepted_records(store: Any) -> list[dict[str, Any]]:
    """Every accepted record in the store, in the order they were made (one per item)."""
    seen: dict[str, dict[str, Any]] = {}
    for _, kind, data in store.events():
        if kind == "autosynth_item" and data["status"] == "accepted" and data.get("record"):
            seen.setdefault(data["item"], data["record"])
    return list(seen.values())


def write_jsonl(records: list[dict[str, Any]], path: Path) -> int:
    """Write atomically (a kill mid-write leaves the previous file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fp:
        for record in records:
            fp.write(json.dumps(record, ensure_ascii=False) + "\n")
    os.replace(tmp, path)
    return len(records)

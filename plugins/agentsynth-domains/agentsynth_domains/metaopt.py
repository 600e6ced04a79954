"""metaopt: evolve the autosynth *harness* (rule strings per role, numeric knobs) over generations.

Each iteration samples a parent from the population by a Boltzmann distribution over training
scores (``p ∝ exp(score / T)``, T = 0.1 by default), asks a **mutator** model for a structured
diff (``{"add": {role: [rule]}, "remove": {role: [rule]}, "knobs": {name: value}}``) informed
by the parent's recent rejection reasons, drops a child identical to any harness seen before
(dedupe), scores it on the training items, and keeps it only when its **validation** score beats
its parent's. A score is the share of items the loop accepted.

The run directory holds ``population.json`` (every kept member with its scores and parent),
``lineage.jsonl`` (one line per iteration: parent, diff, child, scores, decision) and
``best_harness.json``. Both are rewritten / appended atomically per iteration; a rerun on the
same directory continues after the last finished iteration.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import random
from collections import Counter
from pathlib import Path
from typing import Any

import attrs

from agentsynth_kernel import AgentsynthError, SpecError

from .domains import parse_json_object
from .loop import Loop, Meter, run_loop
from .settings import KNOBS, ROLES, Harness, Settings, parse_harness


@attrs.define
class Member:
    id: str
    harness: Harness
    parent: str | None
    iteration: int
    train: float
    val: float
    reasons: dict[str, int] = attrs.field(factory=dict)
    details: list[str] = attrs.field(factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "harness": self.harness.to_dict(), "parent": self.parent, "iteration": self.iteration,
                "train": self.train, "val": self.val, "reasons": self.reasons, "details": self.details}


def harness_key(harness: Harness) -> str:
    return hashlib.sha256(json.dumps(harness.to_dict(), sort_keys=True).encode()).hexdigest()[:12]


def boltzmann(members: list[Member], temperature: float, rng: random.Random) -> Member:
    """A parent drawn with probability ∝ exp(train score / T) (shifted by the best for stability)."""
    best = max(m.train for m in members)
    weights = [math.exp((m.train - best) / max(temperature, 1e-6)) for m in members]
    return rng.choices(members, weights=weights, k=1)[0]


def apply_diff(harness: Harness, diff: dict[str, Any]) -> tuple[Harness, list[str]]:
    """The child harness and the problems with the diff (unknown roles / knobs are left out)."""
    problems: list[str] = []
    rules = {role: list(texts) for role, texts in harness.rules.items()}
    for role, texts in (diff.get("remove") or {}).items():
        if role in rules and isinstance(texts, list):
            rules[role] = [r for r in rules[role] if r not in texts]
    for role, texts in (diff.get("add") or {}).items():
        if role not in ROLES:
            problems.append(f"add.{role}: unknown role")
            continue
        for text in texts if isinstance(texts, list) else [texts]:
            if isinstance(text, str) and text.strip() and text.strip() not in rules.get(role, []):
                rules.setdefault(role, []).append(text.strip())
    knobs = dict(harness.knobs)
    for name, value in (diff.get("knobs") or {}).items():
        if name not in KNOBS or isinstance(value, bool) or not isinstance(value, (int, float)):
            problems.append(f"knobs.{name}: unknown knob or not a number")
            continue
        low, high = KNOBS[name]
        knobs[name] = min(high, max(low, float(value)))
    return Harness({r: t for r, t in rules.items() if t}, knobs), problems


def _options(settings: Settings, source: str) -> dict[str, Any]:
    raw = dict(settings.metaopt)
    defaults = {"generations": 4, "train_items": 4, "val_items": 4, "temperature": 0.1, "seed": 0}
    problems = [f"generate.metaopt.{k}: unknown key (expected {', '.join(defaults)})" for k in raw if k not in defaults]
    out = {**defaults, **{k: v for k, v in raw.items() if k in defaults}}
    for key in ("generations", "train_items", "val_items"):
        if isinstance(out[key], bool) or not isinstance(out[key], int) or out[key] < 1:
            problems.append(f"generate.metaopt.{key}: expected an integer >= 1, got {out[key]!r}")
    if isinstance(out["temperature"], bool) or not isinstance(out["temperature"], (int, float)) or out["temperature"] <= 0:
        problems.append(f"generate.metaopt.temperature: expected a number > 0, got {out['temperature']!r}")
    if problems:
        raise SpecError(source, problems)
    return out


class Metaopt:
    def __init__(self, settings: Settings, domain: Any, client: Any, run_dir: Path, *, source: str = "spec") -> None:
        self.settings, self.domain, self.client, self.run_dir = settings, domain, client, Path(run_dir)
        self.opts = _options(settings, source)
        items = list(domain.items())
        need = self.opts["train_items"] + self.opts["val_items"]
        if len(items) < need:
            raise AgentsynthError(f"metaopt: the domain has {len(items)} items; train_items + val_items need {need}")
        self.train = items[: self.opts["train_items"]]
        self.val = items[self.opts["train_items"]: need]
        self.requests = 0

    async def score(self, harness: Harness, items: list[dict[str, Any]]) -> tuple[float, dict[str, int], list[str]]:
        """The accepted share over ``items`` with ``harness``, rejection reasons, and a few details."""
        settings = attrs.evolve(self.settings, harness=harness, limit=None, pii="off")
        details: list[str] = []

        def seen(kind: str, data: dict[str, Any]) -> None:
            if kind == "round" and data.get("reason"):
                details.append(f"{data['reason']}: {str(data.get('detail', ''))[:160]}")

        report = await run_loop(settings, self.domain, client=self.client, items=items, on_progress=seen)
        self.requests += report.requests
        if report.stopped:
            raise AgentsynthError(f"metaopt: stopped: {report.stopped} (population and lineage so far are kept)")
        if report.failed:
            raise AgentsynthError(f"metaopt: an evaluation failed: {report.failed[0]}")
        reasons = dict(report.rounds)
        reasons.pop("accepted", None)
        return report.accepted / len(items), reasons, details[-5:]

    async def propose(self, parent: Member, iteration: int) -> dict[str, Any]:
        reasons = ", ".join(f"{k} x{v}" for k, v in sorted(parent.reasons.items(), key=lambda kv: -kv[1])) or "none"
        prompt = (f"The harness of a synthetic-data loop (rules appended to each role's system prompt, and knobs):\n"
                  f"{json.dumps(parent.harness.to_dict(), indent=1)}\n\n"
                  f"Roles: {', '.join(ROLES)}. Knobs: {', '.join(f'{k} in [{lo}, {hi}]' for k, (lo, hi) in KNOBS.items())}.\n"
                  f"With it, {parent.train:.0%} of training items were accepted. Recent rejection reasons: {reasons}.\n"
                  + "".join(f"  - {d}\n" for d in parent.details)
                  + "(weak_too_strong: tasks too easy; strong_too_weak: too hard or wrong; gap_too_small: no separation; "
                  "audit_failed / invalid_candidate: malformed tasks.)\n\n"
                  "Propose one small change that would get more tasks accepted. Answer with JSON only: "
                  '{"add": {"ROLE": ["rule"]}, "remove": {"ROLE": ["rule"]}, "knobs": {"NAME": 0.7}, "why": "..."}')
        loop = Loop(self.settings, self.domain, self.client)
        meter = Meter()
        assert self.settings.mutator is not None
        text = await loop.ask(self.settings.mutator, "mutator", prompt, meter, salt=f"metaopt:{iteration}:{parent.id}",
                              temperature=0.7)
        self.requests += meter.requests
        return parse_json_object(text)

    # --- durable state --------------------------------------------------------------------------

    def load(self) -> tuple[list[Member], int, set[str]]:
        path = self.run_dir / "population.json"
        if not path.exists():
            return [], 0, set()
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("fingerprint") != self.fingerprint():
            raise AgentsynthError(f"{self.run_dir}: holds a metaopt run of other settings; use a new --run-dir")
        members = []
        for m in data["members"]:
            harness = parse_harness(m["harness"], "population", [])
            members.append(Member(m["id"], harness, m["parent"], m["iteration"], m["train"], m["val"], m["reasons"],
                                  m.get("details", [])))
        return members, int(data["iterations_done"]), set(data["seen"])

    def fingerprint(self) -> str:
        data = {"domain": self.settings.domain, "params": self.settings.domain_params, "opts": self.opts,
                "root": self.settings.harness.to_dict()}
        return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def save(self, members: list[Member], iterations: int, seen: set[str], line: dict[str, Any] | None) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if line is not None:
            with open(self.run_dir / "lineage.jsonl", "a", encoding="utf-8") as fp:
                fp.write(json.dumps(line) + "\n")
                fp.flush()
                os.fsync(fp.fileno())
        best = max(members, key=lambda m: (m.val, m.train, -m.iteration))
        for name, payload in (("population.json", {"fingerprint": self.fingerprint(), "iterations_done": iterations,
                                                   "seen": sorted(seen), "members": [m.to_dict() for m in members],
                                                   "best": best.id}),
                              ("best_harness.json", best.harness.to_dict())):
            tmp = self.run_dir / (name + ".tmp")
            tmp.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
            os.replace(tmp, self.run_dir / name)

    async def run(self) -> dict[str, Any]:
        members, done, seen = self.load()
        if not members:
            train, reasons, details = await self.score(self.settings.harness, self.train)
            val, _, _ = await self.score(self.settings.harness, self.val)
            members = [Member("h0", self.settings.harness, None, 0, train, val, reasons, details)]
            seen = {harness_key(self.settings.harness)}
            self.save(members, 0, seen, {"iteration": 0, "child": "h0", "decision": "root", "train": train, "val": val})
        decisions: Counter[str] = Counter()
        for iteration in range(done + 1, self.opts["generations"] + 1):
            rng = random.Random(f"{self.opts['seed']}:{iteration}")
            parent = boltzmann(members, float(self.opts["temperature"]), rng)
            line: dict[str, Any] = {"iteration": iteration, "parent": parent.id}
            try:
                diff = await self.propose(parent, iteration)
            except ValueError:
                diff = None
            if diff is None:
                line["decision"] = "invalid_diff"
            else:
                child_harness, problems = apply_diff(parent.harness, diff)
                line.update(diff={k: diff.get(k) for k in ("add", "remove", "knobs", "why") if k in diff},
                            problems=problems)
                key = harness_key(child_harness)
                if key in seen:
                    line["decision"] = "duplicate"
                else:
                    seen.add(key)
                    train, reasons, details = await self.score(child_harness, self.train)
                    val, _, _ = await self.score(child_harness, self.val)
                    child_id = f"h{iteration}"
                    line.update(child=child_id, train=train, val=val, parent_val=parent.val)
                    if val > parent.val:
                        line["decision"] = "accepted"
                        members.append(Member(child_id, child_harness, parent.id, iteration, train, val, reasons,
                                              details))
                    else:
                        line["decision"] = "rejected"
            decisions[line["decision"]] += 1
            self.save(members, iteration, seen, line)
        best = max(members, key=lambda m: (m.val, m.train, -m.iteration))
        return {"generations": self.opts["generations"], "population": len(members), "best": best.to_dict(),
                "root_val": members[0].val, "decisions": dict(decisions), "llm_requests": self.requests,
                "run_dir": str(self.run_dir)}


def run_metaopt_command(spec_file: Path, run_dir: Path | None, json_path: str | None, quiet: bool) -> int:
    """``agentsynth metaopt SPEC``: SPEC is an autosynth generation spec (with optional
    ``generate.metaopt`` and ``generate.mutator``)."""
    import time

    from agentsynth_kernel import load_run_spec

    from .loop import make_client
    from .runner import build_domain, load_settings

    spec, _ = load_run_spec(spec_file)
    if spec.generate is None or spec.generate.type != "autosynth":
        raise SpecError(str(spec_file), ["generate.type: metaopt needs an autosynth generation spec"])
    settings = load_settings(spec_file, spec)
    domain = build_domain(settings, source=str(spec_file))
    run_dir = run_dir or Path("runs") / f"{time.strftime('%Y%m%d-%H%M%S')}-metaopt-{Path(settings.domain).stem}"
    client = make_client(settings, None, spec.budget)
    opt = Metaopt(settings, domain, client, run_dir, source=str(spec_file))

    async def go() -> dict[str, Any]:
        try:
            return await opt.run()
        finally:
            await client.aclose()

    result = asyncio.run(go())
    if json_path:
        text = json.dumps(result, indent=2)
        if json_path == "-":
            print(text)
        else:
            Path(json_path).write_text(text + "\n", encoding="utf-8")
    if not quiet and json_path != "-":
        best = result["best"]
        print(f"metaopt: {result['generations']} generations, population {result['population']}, "
              f"decisions {result['decisions']}; best {best['id']} val {best['val']:.2f} (root {result['root_val']:.2f})")
        print(f"best harness: {run_dir / 'best_harness.json'}")
    return 0

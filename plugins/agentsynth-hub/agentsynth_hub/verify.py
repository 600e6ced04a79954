"""What the hub checks before it ranks a submission. It trusts nothing it can recompute.

In order, each refusal naming what failed:

1. the payload's shape (format, meta, episodes as EpisodeResults);
2. the pack: its id and content hash must be a version the hub stores;
3. the spec (structured like a run spec) and the plan it implies: every submitted episode is a
   planned (task, trial, seed), none twice, none missing;
4. the run hash, recomputed from spec, the hub's pack, the plan and the submitted versions;
5. versions: the plugins that build the pack's world and checkers must be the hub's versions;
6. each episode's status agrees with its verdicts; each episode's provenance names this run;
7. the summary: counts and pass rate are recomputed from the episodes and must match the claim;
8. replay: every passed episode up to ``sample`` (then failed ones at random) is replayed in a fresh
   world by the kernel's ``verify`` and its verdicts must reproduce.
"""

from __future__ import annotations

import json
import random
import re
import tempfile
from pathlib import Path
from typing import Any

import msgspec

from agentsynth_kernel import AgentsynthError, EpisodeResult, SpecError

from .db import HubDB
from .packs import load_stored_pack

FORMAT = "agentsynth-hub-submission/1"
PACK_ID_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}$")
HASH_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
MAX_LABEL = 200


class Refused(Exception):
    """A submission the hub will not rank; ``reason`` says why (shown to the submitter)."""

    def __init__(self, check: str, reason: str) -> None:
        super().__init__(f"{check}: {reason}")
        self.check, self.reason = check, reason


def _need(data: Any, key: str, typ: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(data, dict) or key not in data:
        raise Refused("format", f"{where}.{key}: missing")
    value = data[key]
    if not isinstance(value, typ):
        expected = typ.__name__ if isinstance(typ, type) else " or ".join(t.__name__ for t in typ)
        raise Refused("format", f"{where}.{key}: expected {expected}, got {type(value).__name__}")
    return value


def _version_major_minor(version: str) -> tuple[str, ...]:
    return tuple(version.split(".")[:2])


def world_distributions(pack: Any, host: Any) -> set[str]:
    """Distributions whose code decides the pack's verdicts: its environment and checkers' plugins."""
    used: list[tuple[str, str]] = []
    if pack.environment is not None:
        used.append(("environment", pack.environment.type))
    used += [("checker", c.type) for c in pack.checkers]
    for task in pack.tasks:
        if task.environment is not None and getattr(task.environment, "type", None):
            used.append(("environment", task.environment.type))
        used += [("checker", c.type) for c in task.checkers]
    dists = set()
    for kind, name in used:
        reg = host.registry.get(kind, {}).get(name)
        if reg is not None:
            info = host.plugins.get(reg.plugin)
            if info is not None and info.distribution:
                dists.add(info.distribution)
    return dists


def decode_episodes(raw: list[Any]) -> list[EpisodeResult]:
    from agentsynth_kernel import from_json

    out = []
    for i, item in enumerate(raw):
        try:
            out.append(from_json(json.dumps(item), EpisodeResult))
        except (msgspec.ValidationError, msgspec.DecodeError, TypeError, ValueError) as exc:
            raise Refused("format", f"episodes[{i}]: not an EpisodeResult: {exc}") from None
    return out


def choose_sample(episodes: list[EpisodeResult], sample: int, rng: random.Random) -> list[EpisodeResult]:
    """What gets replayed: passed episodes first (they are what a cheat would forge), then others."""
    replayable = [e for e in episodes if e.status != "error" and e.trajectory is not None]
    passed = [e for e in replayable if e.status == "passed"]
    rest = [e for e in replayable if e.status != "passed"]
    rng.shuffle(passed)
    rng.shuffle(rest)
    return (passed + rest)[:sample]


async def check_submission(payload: Any, *, db: HubDB, cache: Path, sample: int = 8,
                           rng: random.Random | None = None) -> dict[str, Any]:
    """Check a submission; returns what the hub records for an accepted one, raises :class:`Refused`."""
    from agentsynth_kernel import (
        Plan,
        RunSpec,
        get_host,
        pack_record,
        run_hash,
        select_tasks,
        structure,
        summarize_results,
        versions,
    )

    host = get_host()
    rng = rng or random.SystemRandom()
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        got = payload.get("format") if isinstance(payload, dict) else type(payload).__name__
        raise Refused("format", f"format: expected {FORMAT!r}, got {got!r}")
    meta = _need(payload, "meta", dict, "submission")
    summary = _need(payload, "summary", dict, "submission")
    raw_episodes = _need(payload, "episodes", list, "submission")
    label = payload.get("label") or ""
    if not isinstance(label, str) or len(label) > MAX_LABEL:
        raise Refused("format", f"submission.label: expected a string of at most {MAX_LABEL} characters")
    spec_data = _need(meta, "spec", dict, "meta")
    pack_meta = _need(meta, "pack", dict, "meta")
    claimed_hash = _need(meta, "run_hash", str, "meta")
    vers = _need(meta, "versions", dict, "meta")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in vers.items()):
        raise Refused("format", "meta.versions: expected a mapping of distribution names to version strings")
    pack_id = _need(pack_meta, "id", str, "meta.pack")
    pack_hash = _need(pack_meta, "content_hash", str, "meta.pack")
    # both name a directory of the hub's cache: nothing but an id and a sha256 gets that far
    if not PACK_ID_RE.match(pack_id):
        raise Refused("format", f"meta.pack.id: {pack_id[:80]!r} is not a pack id")
    if not HASH_RE.match(pack_hash):
        raise Refused("format", f"meta.pack.content_hash: {pack_hash[:80]!r} is not sha256:<64 hex digits>")

    # 2. the pack
    if spec_data.get("tasks") is not None:
        raise Refused("pack", "the run used inline tasks (tasks: in the spec); the hub ranks runs of stored packs only")
    try:
        pack = load_stored_pack(db, pack_id, pack_hash, cache)
    except (AgentsynthError, SpecError) as exc:
        raise Refused("pack", f"the hub's copy of {pack_id} {pack_hash} does not load: {exc}") from None
    if pack is None:
        known = db.pack_versions(pack_id)
        if not known:
            names = sorted({p["pack_id"] for p in db.pack_versions()})
            raise Refused("pack", f"pack {pack_id!r} is not on this hub (it has: {', '.join(names) or 'none'})")
        hashes = ", ".join(f"{p['content_hash']} (version {p['version']})" for p in known)
        raise Refused("pack", f"pack hash {pack_hash} is not a version of {pack_id!r} on this hub ({hashes}):"
                              " the pack's files differ from any the hub has")

    # 3. spec and plan
    structured = dict(spec_data, pack=str(pack.base_dir))
    try:
        spec = structure(structured, RunSpec, source="meta.spec")
    except SpecError as exc:
        raise Refused("spec", "; ".join(exc.messages)) from None
    if spec.only:
        raise Refused("spec", f"the run played only some tasks (only: {', '.join(spec.only)[:200]}); a leaderboard"
                              " entry must play every task of its split")
    tasks = select_tasks(spec, pack)
    if not tasks:
        raise Refused("spec", f"the spec selects no task of {pack_id} (split={spec.split!r}, only={spec.only})")
    plan = Plan(spec, tasks)
    episodes = decode_episodes(raw_episodes)
    seen: set[tuple[str, int, int]] = set()
    for i, ep in enumerate(episodes):
        if ep.key not in plan:
            raise Refused("plan", f"episodes[{i}] ({ep.task_id!r}, trial {ep.trial}, seed {ep.seed}) is not an"
                                  " episode the spec plans (its task, trial or seed was changed)")
        if ep.key in seen:
            raise Refused("plan", f"episodes[{i}] ({ep.task_id!r}, trial {ep.trial}) is submitted twice")
        seen.add(ep.key)
    if len(episodes) != len(plan):
        raise Refused("plan", f"incomplete run: {len(episodes)} of {len(plan)} planned episodes submitted"
                              " (finish it with agentsynth resume, then submit)")

    # 4. the run hash
    recomputed = run_hash(spec_data, pack_record(pack, spec), plan, vers)
    if recomputed != claimed_hash:
        raise Refused("run_hash", f"recomputed {recomputed}, the submission says {claimed_hash}: its spec, pack,"
                                  " plan or versions were changed after the run")

    # 5. versions of what decides the verdicts
    mine = versions()
    kernel = vers.get("agentsynth")
    if kernel is None or _version_major_minor(kernel) != _version_major_minor(mine.get("agentsynth", "")):
        raise Refused("versions", f"agentsynth {kernel or '(not named)'} ran the submission; the hub runs"
                                  f" {mine.get('agentsynth')} (major.minor must match)")
    for dist in sorted(world_distributions(pack, host)):
        if vers.get(dist) != mine.get(dist):
            raise Refused("versions", f"{dist} {vers.get(dist) or '(not named)'} ran the submission; the hub"
                                      f" replays with {mine.get(dist)}, which decides the verdicts of {pack_id}")

    # 6. each episode on its own
    for i, ep in enumerate(episodes):
        where = f"episodes[{i}] ({ep.task_id!r}, trial {ep.trial})"
        if ep.status not in ("passed", "failed", "error"):
            raise Refused("episodes", f"{where}: unknown status {ep.status!r}")
        if ep.status != "error":
            consistent = bool(ep.verdicts) and all(v.passed for v in ep.verdicts)
            if (ep.status == "passed") != consistent:
                raise Refused("episodes", f"{where}: status {ep.status!r} does not follow from its verdicts")
            if ep.trajectory is None:
                raise Refused("episodes", f"{where}: a checked episode without its trajectory")
        prov = ep.provenance or {}
        if (prov.get("run_hash", claimed_hash) != claimed_hash or prov.get("pack_hash", pack_hash) != pack_hash
                or prov.get("run_id", meta.get("run_id")) != meta.get("run_id")):
            raise Refused("episodes", f"{where}: its provenance names another run or pack")

    # 7. the summary, recomputed
    spec_policy = spec_data.get("policy") if isinstance(spec_data.get("policy"), dict) else {}
    mine_summary = summarize_results(episodes, run_id=str(meta.get("run_id", "")), pack=pack_meta,
                                     policy=spec_policy, trials=spec.trials, seed=spec.seed, planned=len(plan))
    mine_summary.pop("results", None)
    for key in ("episodes", "counts", "pass_rate"):
        if summary.get(key) != mine_summary[key]:
            raise Refused("summary", f"summary.{key} claims {json.dumps(summary.get(key))}, the submitted episodes"
                                     f" give {json.dumps(mine_summary[key])}")

    digest = episodes_digest(episodes)
    earlier = db.already_accepted(str(meta.get("run_id", "")), claimed_hash, digest)
    if earlier is not None:
        raise Refused("duplicate", f"run {meta.get('run_id')} or the same episodes are already on the leaderboard"
                                   f" (submission #{earlier})")

    # 8. replay a sample in fresh worlds
    chosen = choose_sample(episodes, sample, rng)
    replay = await replay_sample(chosen, spec_data, pack, meta, cache) if chosen else {"results": [], "warnings": []}
    differs = [r for r in replay["results"] if r["outcome"] == "differs"]
    if differs:
        r = differs[0]
        raise Refused("replay", f"{len(differs)} of {len(chosen)} replayed episodes do not reproduce; first:"
                                f" {r['task_id']!r} trial {r['trial']}: submitted {r['stored']}, replay"
                                f" {r.get('replayed', '-')}: {r.get('reason', '')}")
    counts = mine_summary["counts"]
    return {
        "pack_id": pack_id, "content_hash": pack_hash, "run_id": str(meta.get("run_id", "")),
        "run_hash": claimed_hash, "label": label or policy_label(spec_policy), "episodes_digest": digest,
        "episodes": mine_summary["episodes"], "passed": counts["passed"],
        "details": {
            "summary": {k: mine_summary[k] for k in ("episodes", "counts", "pass_rate", "pass_rate_excluding_infra",
                                                      f"pass_hat_{spec.trials}", "trials", "errors_by_kind",
                                                      "usage")},
            "verification": {"replayed": len(chosen),
                             "reproduced": sum(r["outcome"] == "reproduced" for r in replay["results"]),
                             "episodes": [[r["task_id"], r["trial"]] for r in replay["results"]],
                             "warnings": replay["warnings"]},
            "provenance": {"policy": spec_policy, "versions": vers, "pack_version": pack.version,
                           "trials": spec.trials, "seed": spec.seed, "split": spec.split},
        },
    }


def episodes_digest(episodes: list[EpisodeResult]) -> str:
    """sha256 over the episodes in key order: keys, statuses and trajectories without wall-clock times."""
    import hashlib

    from agentsynth_kernel import trajectory_bytes

    h = hashlib.sha256()
    for ep in sorted(episodes, key=lambda e: e.key):
        h.update(f"{ep.task_id}\0{ep.trial}\0{ep.seed}\0{ep.status}\0".encode())
        h.update(trajectory_bytes(ep))
        h.update(b"\n")
    return "sha256:" + h.hexdigest()


def policy_label(policy: dict[str, Any]) -> str:
    kind = str(policy.get("type", "?"))
    model = policy.get("model")
    return f"{kind} {model}" if model else kind


async def replay_sample(chosen: list[EpisodeResult], spec_data: dict[str, Any], pack: Any, meta: dict[str, Any],
                        cache: Path) -> dict[str, Any]:
    """The kernel's ``verify`` over a scratch run directory that holds only the sampled episodes,
    its spec pointing at the hub's copy of the pack."""
    from agentsynth_kernel import RunStore, pack_record, verify_run

    with tempfile.TemporaryDirectory(prefix="hub-verify-", dir=cache) as tmp:
        run_dir = Path(tmp) / "run"
        store = RunStore(run_dir)
        try:
            store.set_meta("run_id", str(meta.get("run_id", "")))
            store.set_meta("spec", dict(spec_data, pack=str(pack.base_dir), concurrency=2))  # 2 cores, shared
            store.set_meta("pack", pack_record(pack))
            with store.transaction():
                for ep in chosen:
                    store.put(ep)
        finally:
            store.close()
        return await verify_run(run_dir)

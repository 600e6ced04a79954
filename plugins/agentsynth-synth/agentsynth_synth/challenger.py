"""``challenger``, ``evolve`` and ``from_failures``: an LLM proposes tasks, solvers decide.

All three share one loop (:func:`refine`): a proposal (instruction + checkers in the pack's
checker vocabulary, optionally an oracle) is checked, and if it fails a check the proposer is
told why and revises, up to ``rounds`` times. A proposal is accepted when

1. it is a valid task (``invalid_task``: schema / unknown checker, with the path-qualified problems)
   and not a copy of a task of the pack (``duplicate``);
2. the ``noop`` policy fails it (``noop_passes``: the checkers do not depend on the agent's work);
3. it is **solvable**: some strong solver passes it (``unsolvable``), or, without strong solvers,
   the proposed oracle passes (``oracle_fails``);
4. it is **discriminative**: weak solvers pass at most ``max_weak_pass_rate`` of their attempts
   (``not_discriminative``);
5. the oracle (the proposed one, else the passing strong solver's actions) replays to a pass in a
   fresh world (``oracle_not_reproducible``), so the written pack passes ``pack validate``.

An item that runs out of rounds is rejected with the reason of its last round.

That is ``acceptance: single`` (the default). ``acceptance: verifiable`` is the autosynth loop over a
world, where the pack's checkers are the verifier: after the checks of 1 and 2, ``attempts`` (N) weak
and N strong attempts run in parallel, each in its own fresh world, and the proposal is accepted when
at most ``thresholds.weak_correct_max`` (1) of 4 weak attempts pass (else ``weak_too_strong``: too
easy) and at least ``thresholds.strong_correct_min`` (3) of 4 strong ones do (else
``strong_too_weak``: too hard, or the checkers do not match the request), both scaled to N; then 5.
Weak attempt *i* and strong attempt *i* share a world seed, so a solver's messages are the same
whichever side it is on (only the model differs). ``short_circuit_strong`` runs the weak attempts
first and the strong ones only when the weak gate passes. A **reflector** (``reflector:``; in
verifiable mode the challenger's model by default, ``false`` for none) reads each rejected round's
reason and attempts and its advice goes into the next proposal. Each proposal, attempt and reflection
is stored in the run directory as it lands, so a rerun after a kill requests none of them again.
Accepted records carry ``acceptance``, ``rationale``, ``scores`` and every ``attempts`` row.

- ``challenger``: proposes new tasks for the world from scratch (the pack's tasks as examples).
- ``evolve``: rewrites each existing task into harder / more diverse variants (``strategies``).
- ``from_failures``: reads a run's failed episodes, classifies each (``no_call``, ``wrong_tool``,
  ``bad_arguments``, ``wrong_end_state``) and evolves those tasks with variants aimed at the gap.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import attrs

from agentsynth_kernel import (
    ComponentSpec,
    EpisodeResult,
    InvalidValue,
    Pack,
    SpecError,
    Task,
    ToolCall,
    check_pack,
    located,
    structure,
    verifiable_gate,
)

from .core import (
    Accepted,
    Item,
    LLMSettings,
    Meter,
    Outcome,
    SynthContext,
    action_dicts,
    derive_seed,
    outside_paths,
    parse_json_object,
    task_record,
    why_failed,
)

TASK_FORMAT = """Answer with ONE JSON object only:
{{"instruction": "what the user asks (concrete values, no mention of tools)",
  "checkers": [ {{"type": "<checker type>", ...parameters}} ],
  "environment": {{...optional parameter overrides of the environment for this task, as in the examples}}{oracle_key}}}
The checkers must decide from the world's END STATE whether the request was fulfilled.
Available checker types: {checkers}
"""

ORACLE_KEY = ',\n  "oracle": [{"tool": "<tool>", "arguments": {...}}, ..., {"answer": "final reply"}]'

CHALLENGER_PROMPT = """You write new tasks for AI agents that act in this environment through tools.
First observation of the world:
{world}

Tools: {tools}

Example tasks of this environment (instruction and checkers):
{examples}

Write task #{number}: a NEW task, different from the examples, that a capable agent can solve with the tools
but a careless one gets wrong (several steps, exact values read from the data).{focus}
""" + TASK_FORMAT

EVOLVE_PROMPT = """You rewrite a task for AI agents into a {strategy} variant that still has one correct outcome.
Strategies: constraints = add a condition the agent must respect; multi-step = require several dependent steps;
distractors = add irrelevant but plausible details the agent must ignore.{focus}
First observation of the world:
{world}

Tools: {tools}

Original task:
{original}

Its reference solution:
{solution}

""" + TASK_FORMAT


ACCEPTANCE = ("single", "verifiable")


@attrs.frozen
class Thresholds:
    """Verifiable acceptance (autosynth's defaults), counted of 4 attempts and scaled to ``attempts``."""

    weak_correct_max: float = 1
    strong_correct_min: float = 3

    def __attrs_post_init__(self) -> None:
        for name in ("weak_correct_max", "strong_correct_min"):
            value = getattr(self, name)
            if not 0 <= value <= 4:
                raise InvalidValue(f"thresholds.{name}: must be within [0, 4] (of 4 attempts), got {value}")
        if self.weak_correct_max >= self.strong_correct_min:
            raise InvalidValue(f"thresholds: weak_correct_max ({self.weak_correct_max:g}) must be below "
                               f"strong_correct_min ({self.strong_correct_min:g})")


@attrs.frozen
class ChallengerSpec:
    """Parameters of ``challenger``; ``strong`` / ``weak`` are lists of policy specs."""

    strong: list[dict[str, Any]]
    model: str | None = None
    api_base: str | None = None
    api_key_env: str | None = None
    temperature: float | None = 0.7
    weak: list[dict[str, Any]] = attrs.field(factory=list)
    n: int = 5
    strong_trials: int = 1
    weak_trials: int = 1
    max_weak_pass_rate: float = 0.34
    rounds: int = 3
    examples: int = 3
    focus: list[str] = attrs.field(factory=list)
    split: str = "test"
    tier: str = "synth-challenger"
    id_prefix: str = "ch"
    acceptance: str = "single"
    attempts: int = 4
    thresholds: Thresholds = attrs.field(factory=Thresholds)
    short_circuit_strong: bool = False
    reflector: Any = None
    max_rounds: int | None = None

    def __attrs_post_init__(self) -> None:
        _common(self)
        if not self.strong:
            raise InvalidValue("strong: give at least one strong solver policy")


def _default(spec: Any, name: str) -> Any:
    default: Any = attrs.fields_dict(type(spec))[name].default
    return default.factory() if isinstance(default, attrs.Factory) else default  # type: ignore[arg-type]


def _loop_settings(spec: Any) -> None:
    """acceptance, its settings, rounds / max_rounds and the reflector: a setting the chosen mode
    does not use is an error, not silently ignored."""
    from agentsynth_kernel import did_you_mean

    if spec.max_rounds is not None:
        if spec.rounds != _default(spec, "rounds") and spec.rounds != spec.max_rounds:
            raise InvalidValue(f"max_rounds: give rounds or max_rounds, not both ({spec.rounds} vs {spec.max_rounds})")
        object.__setattr__(spec, "rounds", spec.max_rounds)
    if spec.acceptance not in ACCEPTANCE:
        raise InvalidValue(f"acceptance: expected one of {', '.join(ACCEPTANCE)}, got {spec.acceptance!r}"
                           f"{did_you_mean(str(spec.acceptance), ACCEPTANCE)}")
    if spec.acceptance == "verifiable":
        if not spec.strong or not spec.weak:
            raise InvalidValue("acceptance: verifiable needs strong and weak solver policies (the checkers are the "
                               "verifier): set strong: and weak:")
        if spec.attempts < 1:
            raise InvalidValue(f"attempts: must be at least 1, got {spec.attempts}")
        unused = ("strong_trials", "weak_trials", "max_weak_pass_rate")
    else:
        unused = ("attempts", "thresholds", "short_circuit_strong")
    for name in unused:
        if getattr(spec, name) != _default(spec, name):
            other = "verifiable" if spec.acceptance == "single" else "single"
            raise InvalidValue(f"{name}: a setting of acceptance: {other}, not {spec.acceptance} "
                               f"(set acceptance: {other} or leave {name} out)")
    r = spec.reflector
    if r is None or isinstance(r, (bool, str)):
        return
    if not isinstance(r, dict) or not isinstance(r.get("model"), str):
        raise InvalidValue("reflector: expected false, true (the challenger's model), a model name, or "
                           "{model, api_base, api_key_env, temperature, max_tokens}")
    extra = set(r) - {"model", "api_base", "api_key_env", "temperature", "max_tokens"}
    if extra:
        raise InvalidValue(f"reflector.{sorted(extra)[0]}: unknown key (expected model, api_base, api_key_env, "
                           "temperature, max_tokens)")


def _common(spec: Any) -> None:
    _loop_settings(spec)
    if not spec.model:
        raise InvalidValue("model: the proposer's model is required (e.g. openai/gpt-4o)")
    for key in ("strong", "weak"):
        for i, p in enumerate(getattr(spec, key, []) or []):
            if not isinstance(p, dict) or not isinstance(p.get("type"), str):
                raise InvalidValue(f"{key}[{i}]: expected a policy spec with 'type:'")
    if spec.rounds < 1:
        raise InvalidValue(f"rounds: must be at least 1, got {spec.rounds}")
    if not 0 <= spec.max_weak_pass_rate <= 1:
        raise InvalidValue(f"max_weak_pass_rate: must be within [0, 1], got {spec.max_weak_pass_rate}")
    if spec.split not in ("train", "test"):
        raise InvalidValue(f"split: expected train or test, got {spec.split!r}")


@attrs.frozen
class EvolveSpec:
    """Parameters of ``evolve``: ``variants`` per task, each with the next of ``strategies``."""

    model: str | None = None
    api_base: str | None = None
    api_key_env: str | None = None
    temperature: float | None = 0.7
    strategies: list[str] = attrs.field(factory=lambda: ["constraints", "multi-step", "distractors"])
    variants: int = 1
    strong: list[dict[str, Any]] = attrs.field(factory=list)
    weak: list[dict[str, Any]] = attrs.field(factory=list)
    strong_trials: int = 1
    weak_trials: int = 1
    max_weak_pass_rate: float = 1.0
    rounds: int = 2
    split_filter: str = "all"
    only: list[str] = attrs.field(factory=list)
    split: str = "train"
    tier: str = "synth-evolved"
    id_prefix: str = "ev"
    acceptance: str = "single"
    attempts: int = 4
    thresholds: Thresholds = attrs.field(factory=Thresholds)
    short_circuit_strong: bool = False
    reflector: Any = None
    max_rounds: int | None = None

    def __attrs_post_init__(self) -> None:
        _common(self)
        if self.variants < 1:
            raise InvalidValue(f"variants: must be at least 1, got {self.variants}")
        if not self.strategies:
            raise InvalidValue("strategies: give at least one (constraints, multi-step, distractors)")


@attrs.frozen
class FromFailuresSpec(EvolveSpec):
    """``evolve`` aimed at the failures of a run: ``run`` is its run directory."""

    run: str = ""
    max_tasks: int = 20

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        if not self.run:
            raise InvalidValue("run: the run directory whose failures to target")


def _cspec(data: dict[str, Any]) -> ComponentSpec:
    return ComponentSpec(data["type"], {k: v for k, v in data.items() if k != "type"})


def checker_catalog(ctx: SynthContext) -> str:
    reg = ctx.host.registry["checker"]
    skip = {"synth_fingerprint", "synth_record_probes"}
    return "; ".join(f"{n}: {r.description}" if r.description else n for n, r in sorted(reg.items()) if n not in skip)


def load_oracle(pack: Pack) -> dict[str, list[dict[str, Any]]]:
    """The pack's oracle actions per task, as plain dicts (a task the oracle cannot script is left out)."""
    from agentsynth_kernel import oracle_actions

    out = {}
    for task in pack.tasks:
        try:
            script = oracle_actions(pack, task)
        except Exception:  # a broken oracle scripts nothing
            continue
        if script is None:
            continue
        out[task.id] = [{"tool": a.name, "arguments": dict(a.arguments)} if isinstance(a, ToolCall)
                        else {"answer": a.content} for a in script]
    return out


def parse_task(text: str, task_id: str, ctx: SynthContext, *, split: str, tier: str,
               base: Task | None = None) -> tuple[Task, list[dict[str, Any]] | None]:
    """A proposal as a Task (+ its oracle, if given); ValueError / SpecError with the problems."""
    data = parse_json_object(text)
    record: dict[str, Any] = {"id": task_id, "instruction": data.get("instruction"), "checkers": data.get("checkers"),
              "split": split, "tier": tier}
    if base is not None and base.environment:
        record["environment"] = dict(base.environment)
    if isinstance(data.get("environment"), dict):
        # a proposal may override only what the pack's own tasks override (e.g. the sql world's
        # allowed_changes), never the world's files or limits, and never with a host path
        allowed = {k for t in ctx.pack.tasks for k in t.environment} | set(base.environment if base else {})
        problems = [f"task.environment.{k}: the tasks of this pack do not override {k!r}; a proposal may override "
                    + (", ".join(sorted(allowed)) if allowed else "nothing") for k in data["environment"]
                    if k not in allowed]
        problems += outside_paths(data["environment"], ctx.pack.base_dir, "task.environment")
        if problems:
            raise SpecError("proposal", problems)
        record["environment"] = {**record.get("environment", {}), **data["environment"]}
    task = structure(record, Task, source="proposal", prefix="task")
    if not task.checkers:
        raise ValueError("task.checkers: give at least one checker that reads the end state")
    pack = located(Pack(id="proposal", tasks=[task], environment=ctx.pack.environment,
                        checkers=list(ctx.pack.checkers)), base_dir=ctx.pack.base_dir, source="", content_hash="")
    problems = check_pack(pack, ctx.host)
    if problems:
        raise SpecError("proposal", problems)
    oracle = data.get("oracle")
    if oracle is not None:
        if not isinstance(oracle, list) or not all(isinstance(a, dict) and ("tool" in a or "answer" in a)
                                                   for a in oracle):
            raise ValueError("oracle: expected a list of {tool, arguments} / {answer}")
    return task, oracle


REFLECT_PROMPT = """A task written for AI agents that act in a world through tools was rejected.
The task:
{task}

Why it was rejected: {reason}: {detail}
{pattern}
In two or three sentences, say how the next version of the task should change to be accepted: a careful agent
must be able to solve it with the tools, a careless one must get it wrong, and its checkers must read the world's
end state."""


@attrs.define
class Acceptance:
    """How a round's proposal is accepted (see the module docstring)."""

    mode: str = "single"
    attempts: int = 4
    thresholds: Thresholds = attrs.field(factory=Thresholds)
    short_circuit_strong: bool = False
    reflector: LLMSettings | None = None


def acceptance_of(spec: Any, settings: LLMSettings) -> Acceptance:
    """The acceptance settings of a generator's spec; the reflector defaults to the challenger's model
    in verifiable mode and to none (plain feedback) in single mode."""
    r = spec.reflector
    reflector: LLMSettings | None
    if r is None:
        r = spec.acceptance == "verifiable"
    if r is False:
        reflector = None
    elif r is True:
        reflector = LLMSettings(settings.model, settings.api_base, settings.api_key_env, 0.0, settings.max_tokens)
    elif isinstance(r, str):
        reflector = LLMSettings(r, temperature=0.0)
    else:
        reflector = LLMSettings(r["model"], r.get("api_base"), r.get("api_key_env"), r.get("temperature", 0.0),
                                r.get("max_tokens", 1024))
    return Acceptance(spec.acceptance, spec.attempts, spec.thresholds, spec.short_circuit_strong, reflector)


async def refine(ctx: SynthContext, item: Item, meter: Meter, messages: list[dict[str, Any]], *,
                 settings: LLMSettings, strong: list[dict[str, Any]], weak: list[dict[str, Any]],
                 strong_trials: int, weak_trials: int, max_weak_pass_rate: float, rounds: int, split: str,
                 tier: str, base: Task | None = None, info: dict[str, Any] | None = None,
                 acceptance: Acceptance | None = None) -> Outcome:
    """Propose -> check -> (reflect ->) feedback, up to ``rounds`` rounds (see the module docstring).
    Proposals and reflections are journaled steps: a rerun after a kill does not request them again."""
    acc = acceptance or Acceptance()
    out = Outcome()
    history: list[dict[str, Any]] = []
    reason, detail = "unparseable", ""
    for rnd in range(rounds):
        async def propose(m: Meter) -> str:  # awaited at once (or not at all): the loop's current values
            return await ctx.ask(messages, m, salt=f"{item.id}:{item.seed}:{rnd}", settings=settings)  # noqa: B023

        text = str(await ctx.step(item, f"r{rnd}:proposal", meter, propose))
        messages = [*messages, {"role": "assistant", "content": text}]
        extra: dict[str, Any] = {}
        if acc.mode == "verifiable":
            reason, detail, feedback, accepted, extra = await _verifiable_round(
                ctx, item, meter, text, rnd, strong=strong, weak=weak, acc=acc, split=split, tier=tier, base=base)
        else:
            reason, detail, feedback, accepted = await _judge_round(
                ctx, item, meter, text, rnd, strong=strong, weak=weak, strong_trials=strong_trials,
                weak_trials=weak_trials, max_weak_pass_rate=max_weak_pass_rate, split=split, tier=tier, base=base)
        history.append({"round": rnd, "reason": reason, "detail": detail[:300], **extra})
        if accepted is not None:
            accepted.info.update({"rounds": rnd + 1, "history": history, "acceptance": acc.mode, **(info or {})})
            out.accepted.append(accepted)
            return out
        advice = ""
        if acc.reflector is not None and rnd + 1 < rounds:  # no advice after the last round: nobody reads it
            prompt = REFLECT_PROMPT.format(task=text[:3000], reason=reason, detail=detail[:500],
                                           pattern=_pattern(extra.get("attempts")))
            async def reflect(m: Meter) -> str:
                return await ctx.ask([{"role": "user", "content": prompt}], m,  # noqa: B023
                                     salt=f"{item.id}:{item.seed}:{rnd}:reflect", settings=acc.reflector)  # noqa: B023

            advice = str(await ctx.step(item, f"r{rnd}:reflect", meter, reflect)).strip()
            history[-1]["reflection"] = advice[:500]
        messages = [*messages, {"role": "user", "content": f"Rejected ({reason}): {feedback}\n"
                                + (f"Advice: {advice}\n" if advice else "")
                                + "Revise the task and answer with the corrected JSON object only."}]
    return out.reject(reason, detail, rounds=rounds, history=history)


def _pattern(attempts: list[dict[str, Any]] | None) -> str:
    """The solvers' results for the reflector (which, unlike the solvers, may know who is who)."""
    if not attempts:
        return ""
    lines = []
    for who in ("weak", "strong"):
        rows = [a for a in attempts if a["who"] == who]
        if rows:
            failed = next((a.get("detail", "") for a in rows if not a["passed"]), "")
            lines.append(f"{who}er solvers passed {sum(a['passed'] for a in rows)} of {len(rows)} attempts"
                         + (f" (a failure: {failed})" if failed else ""))
    return "\n".join(lines) + "\n"


Rejection = tuple[str, str, str]  # (reason, detail, feedback for the proposer)


@attrs.frozen
class Screened:
    """A proposal that passed the checks before the solvers: the task, its proposed oracle, the round's seed."""

    task: Task
    oracle: list[dict[str, Any]] | None
    seed: int


async def _screen(ctx: SynthContext, item: Item, meter: Meter, text: str, rnd: int, *, split: str, tier: str,
                  base: Task | None) -> Rejection | Screened:
    """The checks before any solver runs: a valid task, not a copy, and ``noop`` fails it."""
    try:
        task, oracle = parse_task(text, item.id, ctx, split=split, tier=tier, base=base)
    except SpecError as exc:
        msg = "; ".join(exc.messages)
        return "invalid_task", msg, f"the task is not valid: {msg}"
    except ValueError as exc:
        return "unparseable", f"{exc}: {text[:200]}", f"{exc}"
    norm = " ".join(task.instruction.lower().split())
    known = {" ".join(t.instruction.lower().split()): t.id for t in ctx.pack.tasks}
    if norm in known:
        return ("duplicate", f"same request as task {known[norm]!r} of the pack",
                f"this is the same request as the existing task {known[norm]!r}; write a different one")
    seed = derive_seed(item.seed, "round", rnd)
    noop = await ctx.episode(task, ComponentSpec("noop"), seed=seed, meter=meter)
    if noop.status == "error":
        return "invalid_task", why_failed(noop), f"the checkers crash on the untouched world: {why_failed(noop)}"
    if noop.passed:
        return ("noop_passes", "the checkers pass on the untouched world",
                "the checkers already pass when the agent does nothing; they must check the change the task asks "
                "for")
    return Screened(task, oracle, seed)


async def _judge_round(ctx: SynthContext, item: Item, meter: Meter, text: str, rnd: int, *,
                       strong: list[dict[str, Any]], weak: list[dict[str, Any]], strong_trials: int,
                       weak_trials: int, max_weak_pass_rate: float, split: str, tier: str,
                       base: Task | None) -> tuple[str, str, str, Accepted | None]:
    """One round of ``acceptance: single``: some strong solver passes, weak ones mostly fail."""
    screened = await _screen(ctx, item, meter, text, rnd, split=split, tier=tier, base=base)
    if not isinstance(screened, Screened):
        return (*screened, None)
    task, oracle, seed = screened.task, screened.oracle, screened.seed
    solution, solved_by = None, ""
    if strong:
        failures = []
        for si, pol in enumerate(strong):
            for t in range(strong_trials):
                r = await ctx.episode(task, _cspec(pol), seed=derive_seed(seed, "strong", si, t), meter=meter)
                if r.passed and r.trajectory is not None:
                    solution, solved_by = r, pol.get("model", pol["type"])
                    break
                failures.append(why_failed(r, 200))
            if solution is not None:
                break
        if solution is None:
            detail = f"no strong solver passes: {failures[0] if failures else ''}"
            return ("unsolvable", detail, f"no strong solver could solve it ({failures[0] if failures else ''}); "
                    "make it solvable with the tools, and make the checkers match the request exactly", None)
    if oracle is None and solution is not None and solution.trajectory is not None:
        oracle = action_dicts(solution.trajectory)
    if oracle is None:
        return "oracle_fails", "no oracle and no strong solver", "give the 'oracle' actions that solve it", None
    replay = await ctx.episode(task, ComponentSpec("synth_replay", {"actions": oracle}), seed=seed, meter=meter)
    if not replay.passed:
        reason = "oracle_not_reproducible" if strong else "oracle_fails"
        return reason, why_failed(replay), f"the reference solution does not pass: {why_failed(replay)}", None
    if weak:
        results = []
        for wi, pol in enumerate(weak):
            for t in range(weak_trials):
                results.append(await ctx.episode(task, _cspec(pol), seed=derive_seed(seed, "weak", wi, t),
                                                 meter=meter))
        rate = sum(r.passed for r in results) / len(results)
        if rate > max_weak_pass_rate:
            return ("not_discriminative", f"weak solvers pass {rate:.0%} > {max_weak_pass_rate:.0%}",
                    f"weak solvers pass {rate:.0%} of attempts: too easy; make it need more care", None)
    traj = (solution or replay).trajectory
    assert traj is not None
    return "accepted", "", "", Accepted(task, traj,
                                        replay.verdicts if solution is None else solution.verdicts, oracle=oracle,
                                        seed=seed, info={"solved_by": solved_by or "oracle"})


async def _all(coros: list[Any]) -> list[Any]:
    """Run ``coros`` concurrently; results in order. When one fails (the provider gave up, the budget
    ran out) the others are cancelled, so a failed item spends nothing more; attempts that landed
    before are already stored."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        pending = [t for t in tasks if not t.done()]
        for t in pending:
            t.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
    for t in tasks:
        error = None if t.cancelled() else t.exception()
        if error is not None:
            raise error
    return [t.result() for t in tasks]


def _attempt_row(who: str, i: int, pol: dict[str, Any], r: EpisodeResult) -> dict[str, Any]:
    row = {"who": who, "i": i, "policy": pol.get("model", pol["type"]), "seed": r.seed, "passed": r.passed,
           "status": r.status, "steps": len(r.trajectory.steps) if r.trajectory else 0, "requests": r.usage.requests}
    if not r.passed:
        row["detail"] = why_failed(r, 200)
    return row


async def _verifiable_round(ctx: SynthContext, item: Item, meter: Meter, text: str, rnd: int, *,
                            strong: list[dict[str, Any]], weak: list[dict[str, Any]], acc: Acceptance, split: str,
                            tier: str, base: Task | None,
                            ) -> tuple[str, str, str, Accepted | None, dict[str, Any]]:
    """One round of ``acceptance: verifiable``: N weak + N strong attempts in the world, the checkers decide."""
    screened = await _screen(ctx, item, meter, text, rnd, split=split, tier=tier, base=base)
    if not isinstance(screened, Screened):
        return (*screened, None, {})
    task, oracle, seed = screened.task, screened.oracle, screened.seed
    n, t = acc.attempts, acc.thresholds

    async def attempt(who: str, i: int) -> tuple[str, int, dict[str, Any], EpisodeResult]:
        pols = strong if who == "strong" else weak
        pol = pols[i % len(pols)]
        # attempt i of either side plays the same world seed: a solver cannot tell which side it is on
        r = await ctx.stored_episode(item, f"r{rnd}:{who}:{i}", task, _cspec(pol),
                                     seed=derive_seed(seed, "attempt", i), trial=i, meter=meter)
        return who, i, pol, r

    runs: list[tuple[str, int, dict[str, Any], EpisodeResult]] = []
    if acc.short_circuit_strong:
        runs += await _all([attempt("weak", i) for i in range(n)])
    else:
        runs += await _all([attempt(w, i) for w in ("weak", "strong") for i in range(n)])
    weak_ok = sum(r.passed for w, _, _, r in runs if w == "weak")
    rows = [_attempt_row(w, i, p, r) for w, i, p, r in runs]
    scores: dict[str, Any] = {"attempts": n, "weak_correct": weak_ok}
    extra: dict[str, Any] = {"attempts": rows, "scores": scores}
    weak_passes, _, weak_why = verifiable_gate(weak_ok, None, n, weak_correct_max=t.weak_correct_max,
                                               strong_correct_min=t.strong_correct_min)
    if not weak_passes:
        if acc.short_circuit_strong:
            extra["short_circuited"] = True
        return ("weak_too_strong", f"too easy: {weak_why}",
                f"weak solvers solve {weak_ok} of {n} attempts: too easy; make it need more care (more steps, exact "
                "values read from the data)", None, extra)
    if acc.short_circuit_strong:
        more = await _all([attempt("strong", i) for i in range(n)])
        runs += more
        rows += [_attempt_row(w, i, p, r) for w, i, p, r in more]
    strong_runs = [(p, r) for w, _, p, r in runs if w == "strong"]
    strong_ok = sum(r.passed for _, r in strong_runs)
    scores["strong_correct"] = strong_ok
    accepted, _, strong_why = verifiable_gate(weak_ok, strong_ok, n, weak_correct_max=t.weak_correct_max,
                                              strong_correct_min=t.strong_correct_min)
    if not accepted:
        failed = next((why_failed(r, 200) for _, r in strong_runs if not r.passed), "")
        return ("strong_too_weak", f"too hard or broken: {strong_why}: {failed}",
                f"strong solvers solve only {strong_ok} of {n} attempts ({failed}); make it solvable with the tools "
                "and make the checkers match the request exactly", None, extra)
    pol, solution = next((p, r) for p, r in strong_runs if r.passed)
    assert solution.trajectory is not None
    if oracle is None:
        oracle = action_dicts(solution.trajectory)
    replay = await ctx.episode(task, ComponentSpec("synth_replay", {"actions": oracle}), seed=seed, meter=meter)
    if not replay.passed:
        return ("oracle_not_reproducible", why_failed(replay),
                f"the reference solution does not pass: {why_failed(replay)}", None, extra)
    rationale = f"{strong_why}; noop fails; the oracle replays to a pass"
    info = {"solved_by": pol.get("model", pol["type"]), "rationale": rationale, "scores": scores, "attempts": rows}
    return "accepted", "", "", Accepted(task, solution.trajectory, solution.verdicts, oracle=oracle,
                                        seed=solution.seed, trial=solution.trial,
                                        scores={"weak_pass_rate": weak_ok / n, "strong_pass_rate": strong_ok / n},
                                        info=info), extra


def _diverse(tasks: list[Task], n: int) -> list[Task]:
    """Up to ``n`` example tasks, one per tier first (so the examples show the range of the pack)."""
    picked, tiers = [], set()
    for t in tasks:
        if t.tier not in tiers:
            picked.append(t)
            tiers.add(t.tier)
    picked += [t for t in tasks if t not in picked]
    return picked[:n]


class Challenger:
    name = "challenger"
    makes_tasks = True

    def __init__(self, spec: ChallengerSpec) -> None:
        self.spec = spec
        self.settings = LLMSettings(spec.model, spec.api_base, spec.api_key_env, spec.temperature)
        self.acceptance = acceptance_of(spec, self.settings)

    def plan(self, ctx: SynthContext) -> list[Item]:
        return [Item(f"{self.spec.id_prefix}-{i:04d}", derive_seed(ctx.seed, "challenger", i), i)
                for i in range(self.spec.n)]

    async def make(self, ctx: SynthContext, item: Item, meter: Meter) -> Outcome:
        s = self.spec
        world, tools = await ctx.world()
        examples = "\n".join(json.dumps({"instruction": t.instruction,
                                          "checkers": [c.to_dict() for c in ctx.pack.task_checkers(t)],
                                          **({"environment": t.environment} if t.environment else {})})
                             for t in _diverse(ctx.pack.tasks, s.examples))
        focus = f"\nFocus on: {s.focus[item.payload % len(s.focus)]}." if s.focus else ""
        prompt = CHALLENGER_PROMPT.format(
            world=world[:4000], tools=json.dumps([t.to_openai()["function"] for t in tools]), examples=examples,
            number=item.payload + 1, focus=focus, oracle_key="", checkers=checker_catalog(ctx))
        return await refine(ctx, item, meter, [{"role": "user", "content": prompt}], settings=self.settings,
                            strong=s.strong, weak=s.weak, strong_trials=s.strong_trials, weak_trials=s.weak_trials,
                            max_weak_pass_rate=s.max_weak_pass_rate, rounds=s.rounds, split=s.split, tier=s.tier,
                            acceptance=self.acceptance)


class Evolve:
    name = "evolve"
    makes_tasks = True

    def __init__(self, spec: EvolveSpec) -> None:
        self.spec = spec
        self.settings = LLMSettings(spec.model, spec.api_base, spec.api_key_env, spec.temperature)
        self.acceptance = acceptance_of(spec, self.settings)

    def sources(self, ctx: SynthContext) -> list[tuple[Task, str]]:
        s = self.spec
        tasks = [t for t in ctx.pack.tasks if s.split_filter == "all" or t.split == s.split_filter]
        if s.only:
            tasks = [t for t in tasks if t.id in set(s.only)]
        return [(t, "") for t in tasks]

    def plan(self, ctx: SynthContext) -> list[Item]:
        items = []
        k = 0
        for task, focus in self.sources(ctx):
            for v in range(self.spec.variants):
                strategy = self.spec.strategies[k % len(self.spec.strategies)]
                k += 1
                items.append(Item(f"{self.spec.id_prefix}-{task.id}-{v}", derive_seed(ctx.seed, self.name, task.id, v),
                                  {"task": task, "strategy": strategy, "focus": focus}))
        return items

    async def make(self, ctx: SynthContext, item: Item, meter: Meter) -> Outcome:
        s = self.spec
        world, tools = await ctx.world()
        task: Task = item.payload["task"]
        solution = load_oracle(ctx.pack).get(task.id)
        focus = item.payload["focus"]
        prompt = EVOLVE_PROMPT.format(
            strategy=item.payload["strategy"], focus=f"\n{focus}" if focus else "", world=world[:4000],
            tools=json.dumps([t.to_openai()["function"] for t in tools]),
            original=json.dumps({"instruction": task.instruction, "checkers": task_record(task)["checkers"],
                                 **({"environment": task.environment} if task.environment else {})}),
            solution=json.dumps(solution) if solution else "(none)",
            oracle_key=ORACLE_KEY, checkers=checker_catalog(ctx))
        return await refine(ctx, item, meter, [{"role": "user", "content": prompt}], settings=self.settings,
                            strong=s.strong, weak=s.weak, strong_trials=s.strong_trials, weak_trials=s.weak_trials,
                            max_weak_pass_rate=s.max_weak_pass_rate, rounds=s.rounds, split=s.split, tier=s.tier,
                            base=task, info={"source_task": task.id, "strategy": item.payload["strategy"],
                                             **({"gap": item.payload.get("gap")} if item.payload.get("gap") else {})},
                            acceptance=self.acceptance)


GAP_FOCUS = {
    "no_call": "Agents answered without calling any tool: the variant must make it obvious that the answer has to "
               "be looked up or changed with the tools.",
    "wrong_tool": "Agents called the wrong tool (e.g. read instead of write): the variant must require the specific "
                  "tool(s) the solution uses.",
    "bad_arguments": "Agents sent invalid or failing arguments: the variant must require exact values "
                     "(ids, formats) read from the data.",
    "wrong_end_state": "Agents called tools but left the wrong end state: the variant must stress the exact "
                       "outcome (which rows/values must change, and nothing else).",
}


def classify_failure(result: Any, oracle_tools: set[str]) -> str:
    """``no_call``, ``wrong_tool``, ``bad_arguments`` or ``wrong_end_state`` for a failed episode."""
    traj = result.trajectory
    calls = [s for s in (traj.steps if traj else []) if isinstance(s.action, ToolCall)]
    if not calls:
        return "no_call"
    if any(s.invalid or (s.observation is not None and s.observation.error) for s in calls):
        return "bad_arguments"
    if oracle_tools and not oracle_tools <= {s.action.name for s in calls}:
        return "wrong_tool"
    return "wrong_end_state"


class FromFailures(Evolve):
    name = "from_failures"

    def __init__(self, spec: FromFailuresSpec, base_dir: Path | None = None) -> None:
        super().__init__(spec)
        path = Path(spec.run)
        if not path.is_absolute() and base_dir is not None and not path.exists():
            path = base_dir / path
        self.run_dir = path
        self.gaps: dict[str, int] = {}

    def sources(self, ctx: SynthContext) -> list[tuple[Task, str]]:
        from .replay_filter import read_results

        results = read_results(self.run_dir)
        oracle = load_oracle(ctx.pack)
        tasks = {t.id: t for t in ctx.pack.tasks}
        per_task: dict[str, str] = {}
        self.gaps = {}
        for r in results:
            if r.passed or r.status == "error" and r.error_kind not in ("agent", "") or r.task_id not in tasks:
                continue
            gap = classify_failure(r, {a["tool"] for a in oracle.get(r.task_id, []) if "tool" in a})
            self.gaps[gap] = self.gaps.get(gap, 0) + 1
            per_task.setdefault(r.task_id, gap)
        chosen = sorted(per_task)[: self.spec.max_tasks]  # type: ignore[attr-defined]
        return [(tasks[t], GAP_FOCUS[per_task[t]]) for t in chosen]

    def plan(self, ctx: SynthContext) -> list[Item]:
        items = super().plan(ctx)
        for item in items:
            focus = item.payload["focus"]
            item.payload["gap"] = next((g for g, f in GAP_FOCUS.items() if f == focus), "")
        return items

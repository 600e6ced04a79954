"""An agent must not pass the heuristic judge by parroting the task's instruction.

Every task of the sql plugin's `core` pack is played in its real SQLite world by the agents of
``parrot_agent.py``: the instruction said back (verbatim, shuffled, lower-cased), claimed as done
("Done: ...", "I marked it as shipped."), with no tool call, or after calls that cannot change the world
(a read-only query, a SELECT sent to the write tool, an UPDATE that touches no row). Each trajectory must
score below the pass threshold and fail, blind (no verdicts: calibration, routing, the `judged` checker)
and with the world's verdicts; the pack's oracle must still pass both ways.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from parrot_agent import PREFIXES, PREFIXES_WORLD_ONLY, answers

from agentsynth_judge import HeuristicJudge
from agentsynth_kernel import ComponentSpec, EpisodeConfig, EpisodeResult, get_host, load_pack, run_episode

PARROT = Path(__file__).with_name("parrot_agent.py")
THRESHOLD = HeuristicJudge().rubric.pass_threshold
# attack family -> (answer family, the calls made before answering)
FAMILIES = {
    "restate": ("restate", ["none"]),
    "claim-no-call": ("claim", ["none"]),
    "read-then-claim": ("claim", [p for p in PREFIXES if p != "none"]),
    "read-then-restate": ("restate", [p for p in PREFIXES if p != "none"]),
}
# a real write that changes nothing, then the claim: the blind judge cannot tell, the world can
WORLD_ONLY = {"noop-write-then-claim": ("claim", list(PREFIXES_WORLD_ONLY))}


async def _play(pack, plays) -> list[tuple[str, EpisodeResult]]:
    host, gate = get_host(), asyncio.Semaphore(8)

    async def one(label, task, policy):
        async with gate:
            return label, await run_episode(host, pack, task, 0, 1, EpisodeConfig(policy, timeout=60))

    return await asyncio.gather(*(one(label, task, policy) for label, task, policy in plays))


@pytest.fixture(scope="module")
def played() -> dict[str, list[tuple[str, EpisodeResult]]]:
    """family -> [(label, result)] for every `core` task, every variant and every prefix; and the oracle."""
    pack = load_pack("core")
    plays: list[tuple[str, str, object, ComponentSpec]] = []
    for task in pack.tasks:
        plays.append(("oracle", task.id, task, ComponentSpec("oracle")))
        for family, (kind, prefixes) in {**FAMILIES, **WORLD_ONLY}.items():
            for variant in answers(kind, task.instruction):
                for prefix in prefixes:
                    policy = ComponentSpec("callable", {"function": f"{PARROT}:Parrot", "params": {
                        "family": kind, "variant": variant, "prefix": prefix}})
                    plays.append((family, f"{task.id} {variant} after {prefix}", task, policy))
    results = asyncio.run(_play(pack, [(f"{family}\0{label}", task, policy) for family, label, task, policy in plays]))
    out: dict[str, list[tuple[str, EpisodeResult]]] = {}
    for key, result in results:
        family, label = key.split("\0")
        assert result.status in ("passed", "failed"), (label, result.error)
        out.setdefault(family, []).append((label, result))
    assert len(out["oracle"]) == len(pack.tasks) == 22
    return out


def test_the_oracle_still_passes_blind_and_with_verdicts(played):
    judge = HeuristicJudge()
    for label, result in played["oracle"]:
        assert result.status == "passed", label
        for verdicts in ([], result.verdicts):
            judged = judge.score(result.trajectory, verdicts)
            assert judged.passed and judged.score >= THRESHOLD, (label, judged.rationale)


@pytest.mark.parametrize("family", FAMILIES)
def test_parroting_the_instruction_fails(played, family):
    judge = HeuristicJudge()
    labels = [label for label, _ in played[family]]
    assert len({label.split()[0] for label in labels}) == 22  # every task of the pack was attacked
    for label, result in played[family]:
        blind = judge.score(result.trajectory, [])
        assert blind.score < THRESHOLD and not blind.passed, (label, result.trajectory.final_answer, blind.rationale)
        seen = judge.score(result.trajectory, result.verdicts)
        assert seen.score < THRESHOLD and not seen.passed, (label, result.trajectory.final_answer, seen.rationale)


def test_a_claim_without_a_write_is_named_in_the_rationale(played):
    """The blind judge says why it fails a claimed write: the veto names the claim."""
    judge = HeuristicJudge()
    claimed = [r for label, r in played["read-then-claim"] if label.startswith("mark-shipped reported-1 after peek")]
    assert claimed and claimed[0].trajectory.final_answer.endswith("I marked it as shipped.")
    blind = judge.score(claimed[0].trajectory, [])
    assert "'marked'" in blind.rationale and "no call could have done it" in blind.rationale
    assert blind.dimensions["task_completion"] == 0.0 and blind.dimensions["faithfulness"] <= 0.2


def test_a_write_that_changes_nothing_then_a_claim_fails_on_the_verdicts(played):
    """Blind, a call that wrote a row backs the claim (the judge cannot see that it changed nothing the task
    needs); the world's verdicts fail it, and the claim against a failed checker keeps the score below
    the threshold too, not only the pass."""
    judge = HeuristicJudge()
    for label, result in played["noop-write-then-claim"]:
        assert result.status == "failed", label
        seen = judge.score(result.trajectory, result.verdicts)
        assert seen.score < THRESHOLD and not seen.passed, (label, result.trajectory.final_answer, seen.rationale)

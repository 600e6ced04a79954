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
import copy
from pathlib import Path

import pytest
from parrot_agent import PREFIXES, PREFIXES_WORLD_ONLY, answers

from agentsynth_judge import HeuristicJudge
from agentsynth_kernel import (
    Answer,
    ComponentSpec,
    EpisodeConfig,
    EpisodeResult,
    Step,
    get_host,
    load_pack,
    run_episode,
)

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


# what an honest agent might say after the oracle's calls (refusals, lookups, reports in other words)
HONEST_ANSWERS = {
    "lookup-customer-email": [
        "The email address on file for Dana Whitfield is dana.whitfield@example.com.",
        "dana.whitfield@example.com",
    ],
    "count-pending-orders": [
        "4",
        "There are currently 4 orders with status 'pending'.",
        "4 orders are still pending.",
    ],
    "lowest-stock-east": [
        "HAT-01",
        "The SKU is HAT-01 (0 units in the east warehouse).",
    ],
    "order-total": [
        "Order 1008 comes to $56.99 in total.",
        "$56.99",
    ],
    "update-email": [
        "I've updated Maya Chen's email address to maya@chen.example.org.",
        "Done - Maya's email is now maya@chen.example.org.",
        "Maya Chen's record now has the email maya@chen.example.org.",
    ],
    "set-price": [
        "The Travel Mug's price is now $26.00.",
        "Price updated: Travel Mug (MUG-02) = 2600 cents.",
        "Done.",
    ],
    "mark-shipped": [
        "Order 1005 has been marked as shipped.",
        "Done, order 1005 is shipped.",
        "Order 1005's status is now 'shipped'.",
    ],
    "deactivate-customer": [
        "I deactivated Omar Haddad's account (active = 0).",
        "Omar Haddad's account has been deactivated.",
    ],
    "delete-customer-with-orders": [
        "Grace Hopper has existing orders, so I deactivated her account instead of deleting it.",
        "Customers with orders can't be deleted; I set Grace Hopper's account to inactive.",
    ],
    "kitchen-discount": [
        "Reduced the price of all 4 kitchen products by 10%.",
        "Kitchen products are now 10% cheaper.",
    ],
    "restock-low": [
        "7 inventory lines were below 5 units; they are now at 20.",
        "Done: 7 rows updated.",
    ],
    "refund-and-restock": [
        "Refunded order 1004 ($77.98, reason 'returned') and restocked its items in the west warehouse.",
    ],
    "cancel-and-void": [
        "Cancelled order 1006, voided its invoice and returned the 2 kettles to stock.",
    ],
    "transfer-stock": [
        "Transferred 4 Frying Pans from west to east.",
    ],
    "refund-already-refunded": [
        "I can't refund order 1002 because it has already been refunded.",
        "Order 1002 was refunded already, so I made no changes.",
        "Order 1002 has already been refunded; nothing to do.",
    ],
    "ship-unpaid": [
        "Order 1009 hasn't been paid yet, so it can't be shipped.",
        "Order 1009 is unpaid (status: pending), so I left it unchanged.",
        "Order 1009 is still pending payment and has to be paid before it can be shipped.",
    ],
    "cancel-shipped": [
        "Order 1010 was shipped already, so it cannot be cancelled.",
        "I checked order 1010: it has already been shipped, so it can't be cancelled.",
        "Order 1010 is already shipped; shipped orders cannot be cancelled.",
    ],
    "unknown-order": [
        "Order 1099 doesn't exist, so there's nothing to cancel.",
        "No changes were made: order 1099 does not exist.",
        "There is no order with id 1099.",
    ],
}


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


def test_honest_answers_in_other_words_still_pass(played):
    """The oracle's calls with the answer an honest agent might give instead: negations, 'already', a
    bare value, a report that restates the instruction: none of them is read as a claim no call backs."""
    judge = HeuristicJudge()
    oracle = {r.task_id: r for _, r in played["oracle"]}
    for task_id, texts in HONEST_ANSWERS.items():
        for text in texts:
            trajectory = copy.deepcopy(oracle[task_id].trajectory)
            trajectory.steps[-1] = Step(Answer(text), None, trajectory.steps[-1].turn)
            judged = judge.score(trajectory, [])
            assert judged.passed, (task_id, text, judged.rationale)


@pytest.mark.parametrize("family", FAMILIES)
def test_parroting_the_instruction_fails(played, family):
    judge = HeuristicJudge()
    labels = [label for label, _ in played[family]]
    assert len({label.split()[0] for label in labels}) == 22  # every task of the pack was attacked
    for label, result in played[family]:
        if result.status == "passed" and result.trajectory.tool_calls:
            continue  # right, and it looked: see the test below
        blind = judge.score(result.trajectory, [])
        assert blind.score < THRESHOLD and not blind.passed, (label, result.trajectory.final_answer, blind.rationale)
        seen = judge.score(result.trajectory, result.verdicts)
        assert not seen.passed, (label, result.trajectory.final_answer, seen.rationale)
        if result.status == "failed":  # where the checkers were fooled too, they set the task's score
            assert seen.score < THRESHOLD, (label, result.trajectory.final_answer, seen.rationale)


def test_words_alone_that_fool_a_checker_do_not_fool_the_judge(played):
    """Some parrots pass the pack's answer checkers ('It was already refunded order 1002.' holds
    'already'). With no call, the judge fails them even with those verdicts (the claim no call showed);
    the only ones it may pass read the orders table, where the state they claim is shown."""
    judge = HeuristicJudge()
    fooled = [(label, r) for family in FAMILIES for label, r in played[family] if r.status == "passed"]
    words_only = [(label, r) for label, r in fooled if not r.trajectory.tool_calls]
    assert words_only  # the measurement this test stands on: an answer checker alone is fooled by words
    for label, result in words_only:
        seen = judge.score(result.trajectory, result.verdicts)
        assert not seen.passed and "fails despite the score" in seen.rationale, (label, seen.rationale)
    for label, result in fooled:
        if judge.score(result.trajectory, []).passed:
            assert label.endswith("after peek"), label


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
    failed = [(label, r) for label, r in played["noop-write-then-claim"] if r.status == "failed"]
    assert len(failed) > 0.9 * len(played["noop-write-then-claim"])  # (the rest fooled the answer checkers)
    for label, result in failed:
        seen = judge.score(result.trajectory, result.verdicts)
        assert seen.score < THRESHOLD and not seen.passed, (label, result.trajectory.final_answer, seen.rationale)

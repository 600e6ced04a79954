"""metaopt against the scripted server: a mutator diff that helps is kept (validation beats the
parent), a repeated one is deduped, one that does not help is rejected; files in the run dir."""

import json

from click.testing import CliRunner

from agentsynth_domains.metaopt import Member, apply_diff, boltzmann
from agentsynth_domains.settings import Harness
from agentsynth_kernel.cli import cli
from conftest import Roles, llm, read_jsonl, spec_text

RULE = "Every problem needs at least three steps."


def test_boltzmann_prefers_high_training_scores():
    import random

    members = [Member("a", Harness(), None, 0, 0.0, 0.0), Member("b", Harness(), None, 1, 0.5, 0.0)]
    rng = random.Random(0)
    picks = [boltzmann(members, 0.1, rng).id for _ in range(2000)]
    # exp(5) : 1 -> b about 99.3% of the time
    assert 0.98 < picks.count("b") / 2000 < 1.0
    flat = [boltzmann(members, 100.0, rng).id for _ in range(2000)]
    assert 0.4 < flat.count("b") / 2000 < 0.6


def test_apply_diff_adds_removes_and_clamps():
    h = Harness({"challenger": ["old"]}, {})
    child, problems = apply_diff(h, {"add": {"challenger": ["new"], "bogus": ["x"]}, "remove": {"challenger": ["old"]},
                                     "knobs": {"solver_temperature": 9, "nope": 1}})
    assert child.rules == {"challenger": ["new"]} and child.knobs == {"solver_temperature": 1.5}
    assert problems == ["add.bogus: unknown role", "knobs.nope: unknown knob or not a number"]
    assert h.rules == {"challenger": ["old"]}  # the parent is unchanged


def test_metaopt_keeps_a_child_only_when_validation_improves(server, tmp_path):
    proposals = iter([
        {"add": {"solver": ["Be brief."]}, "why": "no effect"},
        {"add": {"challenger": [RULE]}, "why": "tasks are too easy"},
        {"add": {"challenger": [RULE]}, "why": "again"},
    ])
    roles = Roles(mutator=lambda p, n: json.dumps(next(proposals)),
                  weak=lambda p, n: "answer: 2" if "three careful steps" in p else "answer: 7/3",
                  strong=lambda p, n: "answer: 2 1/3")

    def routed(body):
        # the challenger's system prompt carries the harness rules: with RULE it writes a problem
        # the weak solver fails, without it one the weak solver solves
        system = next(m["content"] for m in body["messages"] if m["role"] == "system")
        hard = RULE in system
        text = "A long problem statement about sharing 7 apples among 3 friends equally" + (
            ", in three careful steps." if hard else ".")
        roles.answers["challenger"] = lambda p, n: json.dumps({"problem": text, "answer": "7/3"})
        return roles(body)

    server.handler = routed
    spec = tmp_path / "spec.yaml"
    spec.write_text(spec_text(server, {"type": "math", "count": 4}, max_rounds=1, reflector=None,
                              mutator=llm(server, "mutator"),
                              metaopt={"generations": 3, "train_items": 2, "val_items": 2}), encoding="utf-8")
    result = CliRunner().invoke(cli, ["metaopt", str(spec), "--run-dir", str(tmp_path / "mo"), "--json",
                                      str(tmp_path / "mo.json"), "-q"])
    assert result.exit_code == 0, result.output + repr(result.exception)
    report = json.loads((tmp_path / "mo.json").read_text())
    assert report["root_val"] == 0.0 and report["best"]["val"] == 1.0
    assert report["best"]["harness"]["rules"] == {"challenger": [RULE]}
    assert report["decisions"] == {"rejected": 1, "accepted": 1, "duplicate": 1}
    lineage = read_jsonl(tmp_path / "mo" / "lineage.jsonl")
    assert [line["decision"] for line in lineage] == ["root", "rejected", "accepted", "duplicate"]
    assert lineage[2]["parent"] == "h0" and lineage[2]["val"] > lineage[2]["parent_val"]
    # the mutator saw the parent's rejection reasons
    assert "weak_too_strong x2" in roles.calls("mutator")[0]["user"]
    assert "  - weak_too_strong: weak solved 4 of 4" in roles.calls("mutator")[0]["user"]
    population = json.loads((tmp_path / "mo" / "population.json").read_text())
    assert [m["id"] for m in population["members"]] == ["h0", "h2"] and population["iterations_done"] == 3
    assert json.loads((tmp_path / "mo" / "best_harness.json").read_text())["rules"] == {"challenger": [RULE]}
    # a rerun continues after the last finished iteration: no new requests
    before = len(server.requests)
    result = CliRunner().invoke(cli, ["metaopt", str(spec), "--run-dir", str(tmp_path / "mo"), "-q"])
    assert result.exit_code == 0 and len(server.requests) == before

"""The seed-task taxonomy's sampler (even, deterministic) and the dataset metrics."""

from __future__ import annotations

from collections import Counter
from typing import Any

from agentsynth_generate import generate_records
from agentsynth_generate.metrics import dataset_metrics, ngram_stats
from agentsynth_generate.taxonomy import DOMAINS, sample
from agentsynth_kernel.testing import reply, tool_calls
from conftest import base


def test_sample_is_even_over_domains_and_patterns_and_deterministic() -> None:
    batch = sample(24, seed=1)
    assert Counter(s.domain for s in batch) == {d: 4 for d in DOMAINS}
    for domain in DOMAINS:
        patterns = [s.metadata["pattern"] for s in batch if s.domain == domain]
        assert len(set(patterns)) == 4  # every pattern before any repeat
    assert [s.id for s in sample(24, seed=1)] == [s.id for s in batch]
    assert [s.id for s in sample(24, seed=2)] != [s.id for s in batch]
    assert len({s.id for s in sample(60, seed=0, domains=["travel"])}) == 60  # repeats get new ids


def first_tool_agent(request: dict[str, Any]) -> Any:
    """Calls the first tool it is offered with arguments that fit, then answers."""
    if any(x["role"] == "tool" for x in request["messages"]):
        return reply("Here is what I found.")
    fn = request["tools"][0]["function"]
    props = fn["parameters"]["properties"]
    args = {k: (props[k].get("enum") or ["X-1"])[0] if props[k]["type"] == "string" else 1
            for k in fn["parameters"]["required"]}
    return tool_calls((fn["name"], args))


def test_domain_filter(model: Any) -> None:
    m, server = model
    m.agent = first_tool_agent
    records, report = generate_records(base(server, sample=4, domain=["finance", "support"], semantic=False))
    assert report["metrics"]["domains"] == {"finance": 2, "support": 2}
    # the taxonomy brings each domain's own tools when no catalog is given
    names = {t["function"]["name"] for r in records if r["domain"] == "finance" for t in r["tools"]}
    assert "get_account_balance" in names


def test_ngram_novelty() -> None:
    same = ngram_stats(["book a hotel in oslo"] * 4, 3)
    assert same == {"n": 3, "distinct": 0.25, "novelty": 0.25}
    new = ngram_stats(["book a hotel in oslo", "what is the weather tomorrow", "transfer money to savings now"], 3)
    assert new["distinct"] == 1.0 and new["novelty"] == 1.0


def test_dataset_metrics_signatures() -> None:
    rows = [{"query": "a b c", "mode": "back", "domain": "travel", "tools": ["x", "y"], "grounding": "simulated", "judge": None},
            {"query": "d e f", "mode": "single_agent", "domain": "", "tools": ["x", "y"], "grounding": "world", "judge": None},
            {"query": "g h i", "mode": "single_agent", "domain": "", "tools": [], "grounding": "world", "judge": None}]
    m = dataset_metrics(rows)
    assert m["tool_signatures"]["top"] == {"x->y": 2, "(no tool)": 1}
    assert m["modes"] == {"back": 1, "single_agent": 2} and m["domains"] == {"(none)": 2, "travel": 1}
    assert m["calls_per_record"] == round(4 / 3, 3)

from __future__ import annotations

import pytest

from agentsynth_judge import DEFAULT_RUBRIC, RewardWeights, compute_reward, load_rubric
from agentsynth_kernel import InvalidValue, SpecError, Verdict
from conftest import write_spec


def test_custom_rubric_from_yaml_is_normalised(tmp_path):
    path = write_spec(tmp_path / "r.yaml", """
name: support
pass_threshold: 0.8
dimensions:
  - {name: task_completion, weight: 2, description: solved}
  - {name: politeness, weight: 2}
""")
    rubric = load_rubric(path)
    assert rubric.name == "support" and rubric.pass_threshold == 0.8
    assert rubric.weights() == {"task_completion": 0.5, "politeness": 0.5}
    assert rubric.dimensions[0].description == "solved"
    assert rubric.combine({"task_completion": 1.0, "politeness": 0.0}) == 0.5
    # relative paths resolve against base_dir
    assert load_rubric("r.yaml", base_dir=tmp_path) == rubric
    assert load_rubric(None) is DEFAULT_RUBRIC and load_rubric("default") is DEFAULT_RUBRIC


@pytest.mark.parametrize(("text", "expected"), [
    ("dimensions: [{name: a, weight: x}]", "dimensions[0].weight: expected a number, got str 'x'"),
    ("dimensions: [{name: a, wieght: 1}]", "dimensions[0].wieght: unknown key (did you mean 'weight'?)"),
    ("dimensions: [{name: a, weight: -1}]", "dimensions[0].weight: must be >= 0, got -1"),
    ("dimensions: [{name: a, weight: 1}, {name: a, weight: 1}]", "dimensions[1].name: duplicate dimension 'a'"),
    ("dimensions: [{name: a, weight: 0}]", "dimensions: the weights must not all be zero"),
    ("dimensions: []", "dimensions: a rubric needs at least one dimension"),
    ("pass_threshold: 2\ndimensions: [{name: a, weight: 1}]", "pass_threshold: must be between 0 and 1, got 2"),
    ("dimensions: [{name: reward, weight: 1}]", "dimensions[0].name: 'reward' is reserved"),
    ("- a\n- b", "expected a rubric mapping"),
    ("dimensions: [{name: a, weight: 1}\n", "invalid YAML"),
])
def test_bad_rubric_files_give_path_qualified_errors(tmp_path, text, expected):
    path = write_spec(tmp_path / "bad.yaml", text)
    with pytest.raises(SpecError) as err:
        load_rubric(path)
    assert str(path) in str(err.value)
    assert expected in str(err.value)


def test_missing_rubric_file(tmp_path):
    with pytest.raises(SpecError, match="rubric file not found"):
        load_rubric("nope.yaml", base_dir=tmp_path)


def test_reward_defaults_and_parts():
    ok, bad = Verdict("a", True, 1.0), Verdict("b", False, 0.0)
    r = compute_reward([ok, ok], 0.5)
    assert (r.outcome, r.verification, r.reward) == (1.0, 1.0, pytest.approx(0.9))
    r = compute_reward([ok, bad], 1.0)
    assert (r.outcome, r.verification, r.reward) == (0.0, 0.5, pytest.approx(0.3))
    assert compute_reward([], 1.0).reward == pytest.approx(0.2)
    # no judge score: judge weight dropped, the rest renormalised
    assert compute_reward([ok, bad]).reward == pytest.approx(0.2 * 0.5 / 0.8)
    # configurable weights (normalised)
    w = RewardWeights(outcome=1, verification=0, judge=1)
    assert compute_reward([ok], 0.0, w).reward == pytest.approx(0.5)


def test_reward_weights_are_validated():
    with pytest.raises(InvalidValue, match="reward.judge: must be >= 0"):
        RewardWeights(judge=-1)
    with pytest.raises(InvalidValue, match="must not all be zero"):
        RewardWeights(0, 0, 0)

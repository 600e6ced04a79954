"""The AST matcher on real BFCL items: BFCL's rules for types, optional arguments, strings, nested
values and parallel calls, and the stricter call count."""

from __future__ import annotations

import pytest

from agentsynth_bfcl.convert import load_items
from agentsynth_bfcl.matcher import call_problem, ground_truth_calls, match, standardize, tool_name
from conftest import SUBSET


def item(category: str, item_id: str) -> dict:
    return next(i for i in load_items(category, SUBSET) if i["id"] == item_id)


def score(it: dict, calls: list, kind: str = "calls"):
    return match(it["function"], calls, it["answers"], kind)


def test_the_ground_truth_passes_every_item_of_the_subset_but_the_unsatisfiable_one():
    bad = []
    for category in ("simple", "multiple", "parallel", "parallel-multiple", "live-simple", "live-parallel"):
        for it in load_items(category, SUBSET):
            result = score(it, ground_truth_calls(it["function"], it["answers"]))
            if not result.passed:
                bad.append((it["id"], result.detail))
    # BFCL's own answer for live_simple_106-63-0 leaves out a parameter its function requires
    assert [b[0] for b in bad] == ["live_simple_106-63-0"], bad
    assert "missing required parameter 'auto_loan_payment_start'" in bad[0][1]


def test_an_optional_argument_the_function_does_not_have_is_left_out_by_the_oracle():
    it = item("parallel-multiple", "parallel_multiple_12")  # answer allows permeability: ["", 0.1], not in the doc
    calls = ground_truth_calls(it["function"], it["answers"])
    assert all("permeability" not in a for n, a in calls if n == "calculate_voltage_difference")
    assert score(it, calls).passed


def test_simple_types_and_optional_arguments():
    it = item("simple", "simple_python_0")  # calculate_triangle_area(base=10, height=5, unit in ["units", ""])
    ok = [("calculate_triangle_area", {"base": 10, "height": 5})]
    assert score(it, ok).passed
    assert score(it, [("calculate_triangle_area", {"base": 10, "height": 5, "unit": "Units"})]).passed
    cases = {
        "a float for an integer": {"base": 10.0, "height": 5},
        "a string for an integer": {"base": "10", "height": 5},
        "a bool for an integer": {"base": True, "height": 5},
        "a wrong value": {"base": 10, "height": 6},
        "a missing required argument": {"base": 10},
        "an unknown argument": {"base": 10, "height": 5, "passed": True},
        "an optional argument with a value not allowed": {"base": 10, "height": 5, "unit": "cm"},
    }
    for why, arguments in cases.items():
        result = score(it, [("calculate_triangle_area", arguments)])
        assert not result.passed, why


def test_an_integer_is_accepted_for_a_float_as_bfcl_does():
    it = item("parallel-multiple", "parallel_multiple_1")  # area_rectangle.calculate(length: float ...)
    calls = ground_truth_calls(it["function"], it["answers"])
    ints = [(name, {k: int(v) if isinstance(v, float) else v for k, v in args.items()}) for name, args in calls]
    assert any(type(v) is int for _, a in ints for v in a.values())
    assert score(it, ints).passed


def test_function_names_with_dots_are_offered_with_underscores_and_both_are_matched():
    it = item("simple", "simple_python_1")  # math.factorial
    assert tool_name("math.factorial") == "math_factorial"
    assert score(it, [("math_factorial", {"number": 5})]).passed
    assert score(it, [("math.factorial", {"number": 5})]).passed
    assert not score(it, [("math_factorial", {"number": 5}), ("math.factorial", {"number": 5})]).passed
    assert not score(it, [("factorial", {"number": 5})]).passed


def test_strings_are_compared_like_bfcl():
    assert standardize("April 1, 2024") == standardize("april 1 2024") == "april12024"
    it = item("parallel", "parallel_0")  # spotify.play: Taylor Swift / 20, Maroon 5 / 15
    assert score(it, [("spotify_play", {"artist": "maroon5", "duration": 15}),
                      ("spotify_play", {"artist": "TAYLOR SWIFT", "duration": 20})]).passed
    assert not score(it, [("spotify_play", {"artist": "Taylor Swiftt", "duration": 20}),
                          ("spotify_play", {"artist": "Maroon 5", "duration": 15})]).passed


def test_parallel_calls_match_in_any_order_but_exactly_once_each():
    it = item("parallel", "parallel_0")
    calls = ground_truth_calls(it["function"], it["answers"])
    assert len(calls) == 2
    assert score(it, calls).passed and score(it, calls[::-1]).passed
    assert not score(it, calls[:1]).passed
    assert not score(it, [calls[0], calls[0]]).passed  # the same call twice is not both calls
    result = score(it, [*calls, calls[0]])
    assert not result.passed and "3 call(s) made" in result.detail


def test_parallel_matching_is_complete_not_greedy():
    # Two expected calls; the first call fits both answers, the second only the first answer.
    # A greedy pass gives the first call to the first answer and fails; a matching finds the assignment.
    functions = [{"name": "f", "parameters": {"type": "dict", "properties": {"x": {"type": "integer"}},
                                              "required": ["x"]}}]
    answers = [{"f": {"x": [1, 2]}}, {"f": {"x": [1]}}]
    result = match(functions, [("f", {"x": 1}), ("f", {"x": 2})], answers)
    assert result.passed and result.pairs == ((0, 1), (1, 0))


def test_multiple_needs_the_right_function():
    it = item("multiple", "multiple_0")  # triangle_properties.get among others
    calls = ground_truth_calls(it["function"], it["answers"])
    assert score(it, calls).passed
    other = next(tool_name(f["name"]) for f in it["function"] if tool_name(f["name"]) != calls[0][0])
    result = score(it, [(other, calls[0][1])])
    assert not result.passed and "expected 'triangle_properties.get'" in result.detail


def test_list_and_nested_values():
    it = item("parallel-multiple", "parallel_multiple_0")  # multiples: [[3, 5]]
    calls = ground_truth_calls(it["function"], it["answers"])
    assert score(it, calls).passed
    swapped = [(n, {**a, "multiples": [5, 3]}) if "multiples" in a else (n, a) for n, a in calls]
    assert not score(it, swapped).passed  # a list is compared in order, as BFCL does
    wrong_type = [(n, {**a, "multiples": ["3", "5"]}) if "multiples" in a else (n, a) for n, a in calls]
    assert not score(it, wrong_type).passed


def test_dict_arguments_follow_bfcl_dict_checker():
    doc = {"name": "book", "parameters": {"type": "dict", "required": ["where"], "properties": {
        "where": {"type": "dict", "properties": {"city": {"type": "string"}, "zip": {"type": "string"}}}}}}
    answer = {"where": [{"city": ["New York", "NYC"], "zip": ["", "10001"]}]}
    assert call_problem(doc, {"where": {"city": "nyc"}}, answer) is None
    assert call_problem(doc, {"where": {"city": "NYC", "zip": "10001"}}, answer) is None
    assert "unexpected key" in call_problem(doc, {"where": {"city": "NYC", "country": "US"}}, answer)
    assert "missing key 'city'" in call_problem(doc, {"where": {"zip": "10001"}}, answer)


def test_a_variable_name_where_the_answer_holds_one():
    # BFCL: a string answer for a non-string parameter is a variable name; the model may pass it
    doc = {"name": "f", "parameters": {"type": "dict", "required": ["n"], "properties": {"n": {"type": "integer"}}}}
    assert call_problem(doc, {"n": "count"}, {"n": ["count"]}) is None
    assert call_problem(doc, {"n": "other"}, {"n": ["count"]}) is not None


def test_irrelevance_and_relevance():
    it = load_items("irrelevance", SUBSET)[0]
    assert match(it["function"], [], [], "irrelevance").passed
    name = tool_name(it["function"][0]["name"])
    assert not match(it["function"], [(name, {})], [], "irrelevance").passed
    rel = load_items("live-relevance", SUBSET)[0]
    name = tool_name(rel["function"][0]["name"])
    assert match(rel["function"], [(name, {"prompt": "x"})], [], "relevance").passed
    assert not match(rel["function"], [], [], "relevance").passed
    assert not match(rel["function"], [("not_offered", {})], [], "relevance").passed
    with pytest.raises(ValueError, match="kind must be one of"):
        match(rel["function"], [], [], "exact")

"""BFCL's AST matching of function calls against possible answers, for Python-typed functions.

A port of ``bfcl_eval/eval_checker/ast_eval/ast_checker.py`` (Apache-2.0, the Gorilla / BFCL
authors) without its model registry, so the verdict is the one BFCL gives:

- every argument of a call is checked against the list of values the possible answer allows for
  it; ``""`` in that list marks the argument optional;
- types are checked as BFCL does (an ``int`` is accepted for a ``float``, a ``bool`` is never an
  ``int``, a string where the answer holds a string for another type is a variable name);
- strings are compared case-insensitively without spaces and ``,./-_*^``;
- a call may name a function by its BFCL name (``math.factorial``) or by the name the world
  offers it under (``math_factorial``: OpenAI-style tool names cannot hold dots).

Two deliberate differences: the calls of a parallel task are assigned to the expected calls by a
complete bipartite matching (BFCL's greedy pass can miss an assignment that exists), and the
count of calls must equal the count of expected calls in every category that expects calls
(``simple`` and ``multiple`` expect one), so a right call repeated, or made next to a wrong one,
fails. ``irrelevance`` passes only without any call; ``relevance`` needs at least one call of an
offered function (its arguments are not checked: BFCL has no answers for it).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import attrs

PYTHON_TYPES: dict[str, type] = {"string": str, "integer": int, "float": float, "boolean": bool, "array": list,
                                 "tuple": list, "dict": dict, "any": str}
NESTED = ("array", "tuple")
KINDS = ("calls", "irrelevance", "relevance")


def tool_name(name: str) -> str:
    """The name a function is offered under: dots become underscores, as BFCL does for OpenAI-style APIs."""
    return re.sub(r"\.", "_", name)


def standardize(text: str) -> str:
    """BFCL's string normalisation: no spaces or ``,./-_*^``, lower case, double quotes."""
    return re.sub(r"[ ,./\-_*^]", "", text).lower().replace("'", '"')


def _answer_type(possible: Sequence[Any]) -> type | None:
    for answer in possible:
        if answer != "":
            return type(answer)
    return None


def _type_problem(param: str, value: Any, possible: Any, type_name: str, expected: type,
                  nested: type | None) -> tuple[str | None, bool]:
    """(problem or None, is_variable), as BFCL's ``type_checker``."""
    answer_type = _answer_type(possible) if isinstance(possible, list) else None
    is_variable = answer_type is not None and answer_type is not expected
    if type(value) is expected:
        if nested is None:
            return None, is_variable
        for item in possible:
            fits = True
            if type(item) is list and isinstance(value, list):
                for element in value:
                    problem, _ = _type_problem(param, element, item, nested.__name__, nested, None)
                    if problem:
                        fits = False
                        break
            if fits:
                return None, is_variable
    if answer_type is not None and type(value) is answer_type:
        return None, True
    return (f"incorrect type for parameter {param!r}: expected {type_name}, got {type(value).__name__} "
            f"({_short(value)})"), False


def _string_problem(param: str, value: str, possible: Sequence[Any]) -> str | None:
    allowed = [standardize(p) for p in possible if type(p) is str]
    if standardize(value) not in allowed:
        return f"invalid value for parameter {param!r}: {_short(value)}, expected one of {_short(possible)}"
    return None


def _list_problem(param: str, value: list[Any], possible: Sequence[Any]) -> str | None:
    got = [standardize(v) if type(v) is str else v for v in value]
    allowed = [[standardize(v) if type(v) is str else v for v in p] for p in possible if isinstance(p, list)]
    if got not in allowed:
        return f"invalid value for parameter {param!r}: {_short(value)}, expected one of {_short(possible)}"
    return None


def _dict_problem(param: str, value: dict[str, Any], possible: Sequence[Any]) -> str | None:
    problem = f"invalid value for parameter {param!r}: {_short(value)}"
    for answer in possible:
        if answer == "" or not isinstance(answer, dict):
            continue
        problem = ""
        for key, item in value.items():
            if key not in answer:
                problem = f"parameter {param!r}: unexpected key {key!r}"
                break
            got = standardize(item) if type(item) is str else item
            allowed = [standardize(a) if type(a) is str else a for a in answer[key]]
            if got not in allowed:
                problem = f"parameter {param!r}: invalid value for key {key!r}: {_short(item)}, expected one of {_short(allowed)}"
                break
        if not problem:
            for key, allowed in answer.items():
                if key not in value and "" not in allowed:
                    problem = f"parameter {param!r}: missing key {key!r}"
                    break
        if not problem:
            return None
    return problem


def _list_dict_problem(param: str, value: list[Any], possible: Sequence[Any]) -> str | None:
    problem = f"invalid value for parameter {param!r}: {_short(value)}"
    for answer in possible:
        if not isinstance(answer, list) or len(answer) != len(value):
            problem = f"parameter {param!r}: wrong number of dictionaries in the list"
            continue
        problems = [_dict_problem(param, v, [a]) if isinstance(v, dict) else f"parameter {param!r}: {_short(v)} is "
                    "not a dictionary" for v, a in zip(value, answer, strict=True)]
        first = next((p for p in problems if p), None)
        if first is None:
            return None
        problem = first
    return problem


def call_problem(doc: dict[str, Any], arguments: dict[str, Any], answer: dict[str, list[Any]]) -> str | None:
    """What is wrong with one call's ``arguments`` against one possible answer (``{param: [allowed]}``)
    for the function described by ``doc`` (BFCL's ``simple_function_checker``); None when it matches."""
    parameters = doc.get("parameters") or {}
    details: dict[str, Any] = parameters.get("properties") or {}
    for param in parameters.get("required") or []:
        if param not in arguments:
            return f"missing required parameter {param!r}"
    for param, value in arguments.items():
        if param not in details or param not in answer:
            return f"unexpected parameter {param!r}"
        detail = details[param] if isinstance(details[param], dict) else {}
        type_name = str(detail.get("type", "string"))
        expected = PYTHON_TYPES.get(type_name)
        possible = answer[param]
        if not isinstance(possible, list):
            possible = [possible]
        if expected is None:  # a type BFCL's Python checker does not know: compare the value only
            if value not in possible:
                return f"invalid value for parameter {param!r}: {_short(value)}, expected one of {_short(possible)}"
            continue
        nested = None
        if type_name in NESTED:
            items = detail.get("items")
            nested = PYTHON_TYPES.get(str(items.get("type", ""))) if isinstance(items, dict) else None
        if type_name == "float" and type(value) is int:
            value = float(value)
        problem, is_variable = _type_problem(param, value, possible, type_name, expected, nested)
        if problem:
            return problem
        if not is_variable:
            if expected is dict:
                problem = _dict_problem(param, value, possible)
            elif expected is list and nested is dict:
                problem = _list_dict_problem(param, value, possible)
            elif expected is str:
                problem = _string_problem(param, value, possible)
            elif expected is list:
                problem = _list_problem(param, value, possible)
            elif value not in possible:
                problem = f"invalid value for parameter {param!r}: {_short(value)}, expected one of {_short(possible)}"
            if problem:
                return problem
        elif value not in possible:
            return f"invalid value for parameter {param!r}: {_short(value)}, expected one of {_short(possible)}"
    for param, possible in answer.items():
        if param not in arguments and "" not in (possible if isinstance(possible, list) else [possible]):
            return f"parameter {param!r} not given and not optional"
    return None


@attrs.frozen
class Match:
    """The verdict of the matcher: ``passed`` and why (``detail``), with the call-to-answer pairing."""

    passed: bool
    detail: str
    pairs: tuple[tuple[int, int], ...] = ()


def _docs_by_name(functions: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each function's doc under its BFCL name and under its tool name."""
    docs: dict[str, dict[str, Any]] = {}
    for doc in functions:
        name = str(doc.get("name", ""))
        docs.setdefault(name, doc)
        docs.setdefault(tool_name(name), doc)
    return docs


def match(functions: Sequence[dict[str, Any]], calls: Sequence[tuple[str, dict[str, Any]]],
          answers: Sequence[dict[str, dict[str, list[Any]]]], kind: str = "calls") -> Match:
    """Score the calls an agent made (``(name, arguments)`` in order) for one BFCL item.

    ``functions`` are the item's function docs, ``answers`` its ground truth (a list of
    ``{function name: {param: [allowed values]}}``, one per expected call), ``kind`` one of
    ``calls`` (the calls must match the answers one to one, in any order), ``irrelevance`` (no
    call) or ``relevance`` (at least one call of an offered function).
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    docs = _docs_by_name(functions)
    if kind == "irrelevance":
        if calls:
            return Match(False, f"{len(calls)} call(s) made ({_names(calls)}); none of the offered functions fits "
                         "this request, so the right behaviour is no call")
        return Match(True, "no call made: right, none of the offered functions fits the request")
    if kind == "relevance":
        offered = [c for c in calls if c[0] in docs]
        if offered:
            return Match(True, f"{len(offered)} call(s) of offered functions ({_names(offered)})")
        return Match(False, "no call of an offered function" + (f" (made: {_names(calls)})" if calls else ""))
    if len(calls) != len(answers):
        return Match(False, f"{len(calls)} call(s) made ({_names(calls) or 'none'}), expected {len(answers)}: "
                     f"{', '.join(next(iter(a)) for a in answers)}")
    problems: dict[tuple[int, int], str] = {}
    fits: list[list[int]] = []
    for i, answer in enumerate(answers):
        expected_name, params = next(iter(answer.items()))
        doc = docs.get(expected_name) or {"name": expected_name, "parameters": {}}
        row = []
        for j, (name, arguments) in enumerate(calls):
            if docs.get(name) is not doc:
                problems[(i, j)] = f"calls {name!r}, expected {expected_name!r}"
                continue
            problem = call_problem(doc, arguments, params)
            if problem is None:
                row.append(j)
            else:
                problems[(i, j)] = f"{name}: {problem}"
        fits.append(row)
    owner: dict[int, int] = {}

    def assign(i: int, seen: set[int]) -> bool:
        for j in fits[i]:
            if j not in seen:
                seen.add(j)
                if j not in owner or assign(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    for i in range(len(answers)):
        if not assign(i, set()):
            expected_name = next(iter(answers[i]))
            why = "; ".join(problems[(i, j)] for j in range(len(calls)) if (i, j) in problems) or \
                "its matching call is needed for another expected call"
            label = f"expected call {i + 1} ({expected_name})" if len(answers) > 1 else f"expected {expected_name}"
            return Match(False, f"{label} has no matching call: {why}")
    pairs = tuple(sorted((i, j) for j, i in owner.items()))
    return Match(True, f"{len(calls)} call(s) match the possible answers ({_names(calls)})", pairs)


def _names(calls: Sequence[tuple[str, dict[str, Any]]]) -> str:
    return ", ".join(name for name, _ in calls[:8]) + (" ..." if len(calls) > 8 else "")


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- the ground-truth call -------------------------------------------------------------------------


def _first(possible: Any) -> tuple[bool, Any]:
    """(found, the first allowed value that is not the optional marker)."""
    for value in possible if isinstance(possible, list) else [possible]:
        if value != "":
            return True, value
    return False, None


def _concrete(value: Any, detail: dict[str, Any]) -> Any:
    """A concrete value from one allowed entry: dict entries hold lists of allowed values per key."""
    type_name = detail.get("type")
    if type_name == "dict" and isinstance(value, dict):
        out = {}
        for key, allowed in value.items():
            found, item = _first(allowed)
            if found:
                out[key] = item
        return out
    items = detail.get("items")
    if type_name in NESTED and isinstance(items, dict) and items.get("type") == "dict" and isinstance(value, list):
        return [_concrete(v, {"type": "dict"}) for v in value]
    return value


def ground_truth_calls(functions: Sequence[dict[str, Any]],
                       answers: Sequence[dict[str, dict[str, list[Any]]]]) -> list[tuple[str, dict[str, Any]]]:
    """One call per expected call that the matcher accepts: each argument takes its first allowed
    value; an argument whose only allowed value is the optional marker is left out. Named with the
    tool name the world offers the function under."""
    docs = _docs_by_name(functions)
    calls = []
    for answer in answers:
        name, params = next(iter(answer.items()))
        parameters = (docs.get(name) or {}).get("parameters") or {}
        details = parameters.get("properties") or {}
        required = set(parameters.get("required") or [])
        arguments = {}
        for param, possible in params.items():
            optional = "" in (possible if isinstance(possible, list) else [possible])
            if optional and (param not in required or param not in details):
                continue  # leaving an optional argument out is always allowed
            found, value = _first(possible)
            if found:
                arguments[param] = _concrete(value, details.get(param) or {})
        calls.append((tool_name(name), arguments))
    return calls

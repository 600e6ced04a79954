"""Checkers that read the SQL world's end state.

- ``sql``: a query's result must equal / contain / not contain / compare with an
  expected value (order-insensitive unless ``ordered: true``). It also runs the
  collateral-damage check unless the environment says ``collateral: false`` or the
  checker says ``collateral: false``, so a task cannot forget it.
- ``no_collateral``: only the collateral-damage check (for tasks whose right
  outcome is "nothing changed" or "only these rows changed").
- ``sql_answer``: the final answer names the value a query returns and none of the other
  candidates a ``distractors`` query lists (a dump of the whole table does not pass).

They read the world through the environment's ``end_state()`` (the world's real end state, read-only)
under a budget, and ``check`` is sync so the engine runs it on the episode's worker thread: the
episode timeout bounds the checks too.
"""

from __future__ import annotations

import math
import re
import sqlite3
from collections import Counter
from typing import Any

from agentsynth_kernel import Trajectory, Verdict

from .world import CheckBudgetExceeded

_UNSET: Any = object()
OPS = ("eq", "ne", "lt", "le", "gt", "ge", "contains", "not_contains", "approx")
MAX_SHOWN = 8


def _sql_env(env: Any) -> Any:
    if not callable(getattr(env, "query", None)) or not callable(getattr(env, "unexpected_changes", None)):
        raise TypeError(f"this checker needs the 'sql' environment, got {type(env).__name__}")
    return env


def collateral_verdict(env: Any, name: str) -> Verdict | None:
    """A failing verdict listing the unexpected changes, or None when there are none."""
    bad = env.unexpected_changes()
    if not bad:
        return None
    first = not env.collateral_reported
    env.collateral_reported = True
    shown = "; ".join(c.describe() for c in bad[:MAX_SHOWN]) + (f"; ... {len(bad) - MAX_SHOWN} more" if len(bad) > MAX_SHOWN else "")
    detail = f"unexpected changes outside allowed_changes ({len(bad)}): {shown}" if first else \
        f"unexpected changes outside allowed_changes ({len(bad)}), listed above"
    return Verdict(name, False, 0.0, detail, data={"unexpected": [c.to_dict() for c in bad]})


def over_budget(env: Any, name: str, exc: CheckBudgetExceeded) -> Verdict:
    """A check that ran out of budget: the agent's failure when its actions grew the world,
    else the checker's (an error of the pack, not a verdict on the agent)."""
    if not getattr(env, "grown", False):
        raise RuntimeError(f"{exc} (the world did not grow: raise query_budget / check_budget)") from None
    return Verdict(name, False, 0.0, str(exc), data={"over_budget": True})


def _notes(env: Any) -> str:
    return f" [{'; '.join(env.notes)}]" if getattr(env, "notes", None) else ""


class NoCollateral:
    """Passes when the world changed only where the task's ``allowed_changes`` say it may."""

    world_state = True

    def check(self, env: Any, trajectory: Trajectory) -> Verdict:  # sync: on the episode's thread
        return self.evaluate(env, trajectory)

    def evaluate(self, env: Any, trajectory: Trajectory) -> Verdict:
        env = _sql_env(env)
        try:
            return self._evaluate(env)
        except CheckBudgetExceeded as exc:
            return over_budget(env, "no_collateral", exc)

    def _evaluate(self, env: Any) -> Verdict:
        bad = collateral_verdict(env, "no_collateral")
        if bad is not None:
            return bad
        n = len(env.changes())
        what = f"{n} allowed change(s)" if n else "the world is unchanged"
        return Verdict("no_collateral", True, 1.0, f"no unexpected changes; {what}{_notes(env)}")


def _norm(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_norm(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


_KEPT = frozenset({int, str, bytes, type(None)})  # what _norm returns unchanged
_KEPT_JSON = frozenset({int, float, str, bool, type(None)})  # what _jsonable returns unchanged


def _norm_row(row: Any) -> Any:
    """:func:`_norm` of a row, without a call per value for the common row (a tuple of SQLite's
    ints, texts, blobs and NULLs: kept as it is)."""
    if type(row) is tuple and all(map(_KEPT.__contains__, map(type, row))):
        return row
    return _norm(row)


def _key(value: Any) -> str:
    return repr(value)


class SqlChecker:
    """``query`` on the end state compared with ``expect`` using ``op``.

    ``expect`` forms: a scalar (the query must return one value, or no row for null),
    a list of scalars (one-column rows), or a list of rows (lists). ``op``: eq (default),
    ne, lt, le, gt, ge (scalars), contains / not_contains (rows), approx (``tolerance``).
    Rows compare as multisets unless ``ordered: true``.
    """

    world_state = True

    def __init__(self, query: str, expect: Any = _UNSET, op: str = "eq", ordered: bool = False,
                 tolerance: float = 1e-9, collateral: bool | None = None, name: str = "") -> None:
        if op not in OPS:
            raise ValueError(f"op: expected one of {', '.join(OPS)}, got {op!r}")
        if expect is _UNSET:
            raise ValueError("the sql checker needs 'expect' (a value, a list of values, or a list of rows)")
        if op in ("lt", "le", "gt", "ge", "approx") and isinstance(expect, list):
            raise ValueError(f"op {op!r} compares one value; 'expect' must not be a list")
        if op in ("contains", "not_contains") and not isinstance(expect, list):
            expect = [expect]
        self.query, self.expect, self.op, self.ordered = query, expect, op, ordered
        self.tolerance, self.collateral, self.name = tolerance, collateral, name or "sql"
        # what every episode compares with, normalised once (a checker is reused across episodes)
        self._expect = [_norm(e) for e in expect] if isinstance(expect, list) else _norm(expect)
        # a multiset as the sorted reprs of its items: equal lists of them, equal multisets
        self._expect_keys = sorted(map(_key, self._expect)) if isinstance(expect, list) else None
        self._scalars = isinstance(expect, list) and bool(expect) and all(not isinstance(e, list) for e in expect)
        self._shown = _show(self._expect)  # as every verdict's detail shows it

    def _actual(self, rows: list[tuple[Any, ...]]) -> Any:
        if not isinstance(self.expect, list):
            if not rows:
                return None
            if len(rows) > 1 or len(rows[0]) != 1:
                raise ValueError(f"expected one value, the query returned {len(rows)} row(s) of {len(rows[0])} column(s)")
            return _norm(rows[0][0])
        if self._scalars or (not self.expect and rows and len(rows[0]) == 1):
            return [_norm(r[0]) if len(r) == 1 else _norm_row(r) for r in rows]
        return [_norm_row(r) for r in rows]

    def _compare(self, actual: Any) -> tuple[bool, str]:
        expect, op = self._expect, self.op
        if op in ("eq", "ne"):
            if isinstance(expect, list):
                keys = list(map(_key, actual))  # each item's repr once: the comparison's and the detail's
                same = actual == expect if self.ordered else sorted(keys) == self._expect_keys
                shown = _show_keys(keys)
            else:
                same, shown = self._close(actual, expect), _show(actual)
            ok = same if op == "eq" else not same
            return ok, f"got {shown}, expected {'' if op == 'eq' else 'not '}{self._shown}"
        if op in ("contains", "not_contains"):
            have = Counter(map(_key, actual))
            missing = [e for e in expect if have[_key(e)] == 0]
            present = [e for e in expect if have[_key(e)] > 0]
            if op == "contains":
                return not missing, f"missing {_show(missing)} in {_show(actual)}" if missing else f"contains {self._shown}"
            return not present, f"unexpectedly present: {_show(present)}" if present else f"none of {self._shown} present"
        if actual is None:
            return False, f"got no value (NULL), expected {op} {expect!r}"
        try:
            if op == "approx":
                ok = math.isclose(float(actual), float(expect), rel_tol=0, abs_tol=self.tolerance)
            else:
                ok = {"lt": actual < expect, "le": actual <= expect, "gt": actual > expect, "ge": actual >= expect}[op]
        except (TypeError, ValueError):
            return False, f"cannot compare {actual!r} with {expect!r}"
        return ok, f"got {actual!r}, expected {op} {expect!r}"

    def _close(self, a: Any, b: Any) -> bool:
        if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
            return math.isclose(a, b, rel_tol=0, abs_tol=self.tolerance)
        return a == b

    def check(self, env: Any, trajectory: Trajectory) -> Verdict:  # sync: on the episode's thread
        return self.evaluate(env, trajectory)

    def evaluate(self, env: Any, trajectory: Trajectory) -> Verdict:
        env = _sql_env(env)
        try:
            return self._evaluate(env)
        except CheckBudgetExceeded as exc:
            return over_budget(env, self.name, exc)

    def _evaluate(self, env: Any) -> Verdict:
        try:
            actual = self._actual(env.query(self.query))
        except (sqlite3.Error, ValueError) as exc:
            return Verdict(self.name, False, 0.0, f"{self.query!r}: {exc}")
        ok, detail = self._compare(actual)
        detail = f"{self.query}: {detail}"
        collateral = self.collateral if self.collateral is not None else getattr(env.spec, "collateral", True)
        if collateral:
            bad = collateral_verdict(env, self.name)
            if bad is not None:
                return Verdict(self.name, False, 0.0, f"{detail}; {bad.detail}" if ok else f"{detail}; also {bad.detail}",
                               data={"actual": _jsonable(actual), **bad.data})
        return Verdict(self.name, ok, float(ok), detail + _notes(env), data={"actual": _jsonable(actual)})


def _show(value: Any, limit: int = 10) -> str:
    if isinstance(value, list) and len(value) > limit:
        return repr(value[:limit])[:-1] + f", ... {len(value) - limit} more]"
    return repr(value)


def _show_keys(keys: list[str], limit: int = 10) -> str:
    """:func:`_show` of a list, from its items' reprs."""
    more = f", ... {len(keys) - limit} more" if len(keys) > limit else ""
    return "[" + ", ".join(keys[:limit]) + more + "]"


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple | list):
        if all(map(_KEPT_JSON.__contains__, map(type, value))):  # the common row: no call per value
            return list(value)
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    return value


class SqlAnswer:
    """The final answer names every value ``query`` returns (first column) and none of the other
    values ``distractors`` returns, so listing every email or SKU of a table does not pass a
    lookup. Values match as whole words, case-insensitively unless ``case_sensitive``. Both
    queries read the world's end state under the checks' budget."""

    world_state = False

    def __init__(self, query: str, distractors: str | None = None, case_sensitive: bool = False,
                 name: str = "") -> None:
        if not isinstance(query, str) or not query.strip():
            raise ValueError("sql_answer: 'query' must be an SQL query returning the expected value(s)")
        if distractors is not None and (not isinstance(distractors, str) or not distractors.strip()):
            raise ValueError("sql_answer: 'distractors' must be an SQL query listing the wrong candidates")
        self.query, self.distractors, self.case_sensitive = query, distractors, case_sensitive
        self.name = name or "sql_answer"

    def _found(self, value: Any, answer: str, lowered: str | None = None) -> bool:
        """``lowered``: the answer in lower case when it is ASCII. A value that is not even a substring
        of the answer cannot match (for ASCII text in an ASCII answer, IGNORECASE is ASCII case):
        most distractors are rejected without building and running a pattern."""
        text = _text(value)
        if not text:
            return False
        if self.case_sensitive:
            if text not in answer:
                return False
        elif lowered is not None and text.isascii() and text.lower() not in lowered:
            return False
        flags = 0 if self.case_sensitive else re.IGNORECASE
        return re.search(rf"(?<!\w){re.escape(text)}(?!\w)", answer, flags) is not None

    def check(self, env: Any, trajectory: Trajectory) -> Verdict:  # sync: on the episode's thread
        return self.evaluate(env, trajectory)

    def evaluate(self, env: Any, trajectory: Trajectory) -> Verdict:
        env = _sql_env(env)
        answer = trajectory.final_answer or ""
        try:
            expected = [r[0] for r in env.query(self.query)]
            others = [r[0] for r in env.query(self.distractors)] if self.distractors else []
        except CheckBudgetExceeded as exc:
            return over_budget(env, self.name, exc)
        except sqlite3.Error as exc:
            return Verdict(self.name, False, 0.0, f"{exc}")
        if not expected:
            return Verdict(self.name, False, 0.0, f"{self.query!r} returned no value to look for")
        lowered = answer.lower() if answer.isascii() else None
        missing = [v for v in expected if not self._found(v, answer, lowered)]
        wanted = {_text(v).casefold() for v in expected}
        wrong = [v for v in dict.fromkeys(others) if _text(v).casefold() not in wanted and self._found(v, answer, lowered)]
        if missing:
            return Verdict(self.name, False, 0.0, f"the answer does not name {_show(missing)}")
        if wrong:
            return Verdict(self.name, False, 0.0, f"the answer also names {len(wrong)} wrong candidate(s): {_show(wrong)}")
        return Verdict(self.name, True, 1.0, f"the answer names {_show(expected)} and no other candidate")


def _text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return "" if value is None else str(value)

"""Checkers that read a browser episode's end state: the app's database, the final page, its URL.

None of them reads what the agent can edit without changing the world (README, "What a checker
reads"): ``app_db`` opens the episode's database file read-only on a connection of its own;
``page`` re-loads the final URL from the app in a fresh browser context (the agent's page, with
its typed values and anything its scripts did, is never read); ``url`` takes the final page's URL
without the fragment and accepts it only if the app really served it. Each runs within the
environment's ``check_timeout``; running out of it, or a page the app does not serve, fails the
check with the reason (the agent's doing), while a dead browser is an environment error.
"""

from __future__ import annotations

import math
import re
import sqlite3
import time
from typing import Any

from agentsynth_kernel import Trajectory, Verdict


def _env_of(env: Any, checker: str) -> Any:
    if not hasattr(env, "final_page_texts") or not hasattr(env, "final_url"):
        raise TypeError(f"the {checker!r} checker needs a 'browser' environment, got {type(env).__name__}")
    return env


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-6)
    return a == b


def _rows_equal(actual: list[list[Any]], expected: list[list[Any]]) -> bool:
    return len(actual) == len(expected) and all(
        len(r) == len(e) and all(_same(x, y) for x, y in zip(r, e, strict=True)) for r, e in zip(actual, expected, strict=True)
    )


class AppDbChecker:
    """Runs ``query`` on the app's SQLite database at the end of the episode.

    ``expected`` is a single value (the query must return one row with one column equal to
    it), or a list of rows (lists), compared in order unless ``ordered: false``. ``[]``
    means "no rows".
    """

    world_state = True  # reads the world's end state (agentsynth pack validate)

    def __init__(self, query: str, expected: Any, ordered: bool = True) -> None:
        if not isinstance(query, str) or not query.strip():
            raise ValueError("query: expected a non-empty SQL string")
        self.query, self.expected, self.ordered = query, expected, ordered

    MAX_ROWS = 10_000

    def check(self, env: Any, trajectory: Trajectory) -> Verdict:
        if getattr(env, "crashed", ""):
            raise RuntimeError(f"the browser failed during the episode: {env.crashed}")
        db_path = getattr(env, "db_path", None)
        if db_path is None:
            raise TypeError("the 'app_db' checker needs a browser environment with a 'db:' database")
        budget = float(getattr(env, "check_timeout", 10.0))
        deadline = time.monotonic() + budget
        # the episode's own file, read-only, on a connection of the checker's: nothing the app's
        # requests did to their connections (temporary objects, settings) is visible here
        con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=budget)
        con.set_progress_handler(lambda: time.monotonic() > deadline, 10_000)
        try:
            con.execute("PRAGMA query_only = ON")
            rows = [list(r) for r in con.execute(self.query).fetchmany(self.MAX_ROWS + 1)]
        except sqlite3.OperationalError as exc:
            if "interrupted" not in str(exc):
                raise
            return Verdict("app_db", False, 0.0, f"the query did not finish within the check budget of {budget:g}s "
                           "(the app's database as the agent left it)")
        finally:
            con.close()
        if len(rows) > self.MAX_ROWS:
            return Verdict("app_db", False, 0.0, f"the query returned more than {self.MAX_ROWS} rows")
        if isinstance(self.expected, list):
            expected = [list(r) if isinstance(r, (list, tuple)) else [r] for r in self.expected]
            actual = rows
            if not self.ordered:
                actual, expected = sorted(actual, key=repr), sorted(expected, key=repr)
            ok = _rows_equal(actual, expected)
        else:
            ok = len(rows) == 1 and len(rows[0]) == 1 and _same(rows[0][0], self.expected)
        shown = rows if len(rows) <= 5 else [*rows[:5], "..."]
        return Verdict("app_db", ok, float(ok), f"query returned {shown!r}, expected {self.expected!r}",
                       data={"rows": rows[:50]})


class PageChecker:
    """Asserts on the final page's DOM.

    ``selector`` (default ``body``) picks elements; with ``text`` one of them must contain
    it (case-insensitive unless ``case_sensitive``), with ``regex`` one must match it,
    with ``count`` exactly that many must exist; with none of those at least one must exist.
    ``absent: true`` inverts the whole check.
    """

    world_state = True  # reads the world's end state (agentsynth pack validate)

    def __init__(self, selector: str = "body", text: str | None = None, regex: str | None = None,
                 count: int | None = None, absent: bool = False, case_sensitive: bool = False) -> None:
        self.selector, self.text, self.count, self.absent = selector, text, count, absent
        self.case_sensitive = case_sensitive
        self.regex = re.compile(regex, 0 if case_sensitive else re.IGNORECASE) if regex else None

    async def check(self, env: Any, trajectory: Trajectory) -> Verdict:
        final = await _env_of(env, "page").final_page_texts(self.selector)
        where = final["url"]
        if final.get("problem"):
            return Verdict("page", False, 0.0, final["problem"], data={"url": where})
        texts = final["texts"]
        what = [f"selector {self.selector!r}"]
        found = bool(texts)
        if self.count is not None:
            found = len(texts) == self.count
            what.append(f"count == {self.count}")
        if self.text is not None:
            needle = self.text if self.case_sensitive else self.text.lower()
            found = found and any(needle in (t if self.case_sensitive else t.lower()) for t in texts)
            what.append(f"text {self.text!r}")
        if self.regex is not None:
            found = found and any(self.regex.search(t) for t in texts)
            what.append(f"regex /{self.regex.pattern}/")
        ok = not found if self.absent else found
        detail = f"{'absent' if self.absent else 'present'}: {', '.join(what)} on {where[:200]} (re-loaded): " + (
            "yes" if ok else f"no ({len(texts)} element(s) matched the selector)")
        return Verdict("page", ok, float(ok), detail, data={"url": where[:2000], "matches": len(texts)})


class UrlChecker:
    """Asserts on the final URL as the app served it: a path for the pack's app (else the full URL),
    without the fragment; a URL the app did not serve in this episode fails.

    ``equals`` (the whole URL), ``path`` (without query string), ``contains`` or ``regex`` (search).
    """

    world_state = True  # reads the world's end state (agentsynth pack validate)

    def __init__(self, equals: str | None = None, path: str | None = None, contains: str | None = None,
                 regex: str | None = None) -> None:
        if equals is None and path is None and contains is None and regex is None:
            raise ValueError("the 'url' checker needs one of equals, path, contains, regex")
        self.equals, self.path, self.contains = equals, path, contains
        self.regex = re.compile(regex) if regex else None

    async def check(self, env: Any, trajectory: Trajectory) -> Verdict:
        url, served = await _env_of(env, "url").final_url()
        if served is False:
            return Verdict("url", False, 0.0, f"url {url[:200]!r} was not served by the app in this episode "
                           "(a URL the page made up, or a page off the site)", data={"url": url[:2000]})
        problems = []
        if self.equals is not None and url != self.equals:
            problems.append(f"!= {self.equals!r}")
        if self.path is not None and url.split("?", 1)[0].split("#", 1)[0] != self.path:
            problems.append(f"path != {self.path!r}")
        if self.contains is not None and self.contains not in url:
            problems.append(f"does not contain {self.contains!r}")
        if self.regex is not None and not self.regex.search(url):
            problems.append(f"does not match /{self.regex.pattern}/")
        ok = not problems
        return Verdict("url", ok, float(ok), f"url {url[:200]!r}" + (": " + "; ".join(problems) if problems else " ok"),
                       data={"url": url[:2000]})

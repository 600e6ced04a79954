"""What a factory parameter's annotation allows: types, items, and ``Bounds`` extras.

Used for factories without a ``spec_cls`` (their annotations are the schema) and for the bounds of a
``spec_cls``'s own fields.
"""

from __future__ import annotations

import collections.abc
import functools
import inspect
import math
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import attrs


@attrs.frozen
class Bounds:
    """``Annotated[int, Bounds(low=1)]`` on a factory parameter: the value must be >= ``low``,
    <= ``high`` and > ``above``, checked when the spec is loaded (not when an episode starts)."""

    low: float | None = None
    high: float | None = None
    above: float | None = None

    def problem(self, value: Any) -> str | None:
        """What is wrong with a number (None when it is in range, or not a number)."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high) \
                or (self.above is not None and value <= self.above):
            return f"{self.describe()}, got {value!r}"
        return None

    def describe(self) -> str:
        parts = [f">= {self.low:g}" if self.low is not None else "", f"> {self.above:g}" if self.above is not None else "",
                 f"<= {self.high:g}" if self.high is not None else ""]
        return " and ".join(p for p in parts if p)



def _describe(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {value!r}"



@functools.lru_cache(maxsize=1024)
def _parameter_hints(factory: Any) -> dict[str, Any]:
    """Each parameter's annotation, evaluated (``Annotated`` extras kept). One that cannot be
    evaluated (a name imported only for type checkers) is left out: that parameter is not checked."""
    target = factory.__init__ if inspect.isclass(factory) else factory
    try:
        return dict(typing.get_type_hints(target, include_extras=True))
    except Exception:  # noqa: BLE001 - fall back to one annotation at a time
        pass
    namespace = getattr(inspect.unwrap(target), "__globals__", {})
    hints: dict[str, Any] = {}
    for name, annotation in getattr(target, "__annotations__", {}).items():
        if isinstance(annotation, str):
            try:
                annotation = eval(annotation, namespace)  # noqa: S307 - the plugin's own annotation
            except Exception:  # noqa: BLE001
                continue
        hints[name] = annotation
    return hints


def _markers(hint: Any) -> list[Any]:
    """The ``Annotated`` extras of a hint (or of the members of a union of them), as classes and objects."""
    if typing.get_origin(hint) is Annotated:
        extras = list(hint.__metadata__)
        return extras + [type(e) for e in extras]
    if typing.get_origin(hint) in (Union, types.UnionType):
        return [m for member in typing.get_args(hint) for m in _markers(member)]
    return []


_SEQUENCES = (list, tuple, set, frozenset, collections.abc.Sequence, collections.abc.MutableSequence,
              collections.abc.Iterable, collections.abc.Collection, collections.abc.Set)
_MAPPINGS = (dict, collections.abc.Mapping, collections.abc.MutableMapping)
_NAMES = {int: "an integer", float: "a number", bool: "true or false", str: "a string", Path: "a path",
          type(None): "null"}


def _base(hint: Any) -> Any:
    return typing.get_args(hint)[0] if typing.get_origin(hint) is Annotated else hint


def _fits(value: Any, hint: Any) -> bool:
    """Whether ``value`` has the outer shape of ``hint`` (items are checked by _type_problems)."""
    hint = _base(hint)
    origin = typing.get_origin(hint) or hint
    if hint is None or hint is type(None):
        return value is None
    if origin in (Union, types.UnionType):
        return any(_fits(value, m) for m in typing.get_args(hint))
    if origin is Literal:
        return any(value == a and type(value) is type(a) for a in typing.get_args(hint))
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value)
    if hint in (str, Path):
        return isinstance(value, str)
    if origin in _SEQUENCES:
        return isinstance(value, list)
    if origin in _MAPPINGS:
        return isinstance(value, Mapping)
    return True  # Any, object, classes, callables ...: not checked here


def _type_name(hint: Any) -> str:
    hint = _base(hint)
    origin = typing.get_origin(hint) or hint
    if origin in (Union, types.UnionType):
        names = [_type_name(m) for m in typing.get_args(hint)]
        return " or ".join(dict.fromkeys(names))
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(hint))
    if hint is None:
        return "null"
    if origin in _SEQUENCES:
        return "a list"
    if origin in _MAPPINGS:
        return "a mapping"
    try:
        return _NAMES[hint]
    except (KeyError, TypeError):
        return getattr(hint, "__name__", str(hint))


def _type_problems(value: Any, hint: Any, where: str) -> list[str]:
    """What is wrong with ``value`` against an annotation: type, items, and ``Bounds`` extras."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        problems = _type_problems(value, args[0], where)
        for mark in args[1:]:
            problem = mark.problem(value) if isinstance(mark, Bounds) and not problems else None
            if problem:
                problems.append(f"{where}: expected {_type_name(args[0])} {problem}")
        return problems
    if origin in (Union, types.UnionType):
        fitting = [m for m in args if _fits(value, m)]
        if not fitting:
            return [f"{where}: expected {_type_name(hint)}, got {_describe(value)}"]
        results = [_type_problems(value, m, where) for m in fitting]
        return [] if any(not r for r in results) else results[0]
    if not _fits(value, hint):
        return [f"{where}: expected {_type_name(hint)}, got {_describe(value)}"]
    if origin in _SEQUENCES and args:
        if origin is tuple and args[-1] is not Ellipsis:
            if len(value) != len(args):
                return [f"{where}: expected a list of {len(args)} values, got {len(value)}"]
            return [p for i, (v, h) in enumerate(zip(value, args, strict=True)) for p in _type_problems(v, h, f"{where}[{i}]")]
        return [p for i, v in enumerate(value) for p in _type_problems(v, args[0], f"{where}[{i}]")]
    if origin in _MAPPINGS and len(args) == 2:
        return [p for k, v in value.items() for p in _type_problems(v, args[1], f"{where}.{k}")]
    return []


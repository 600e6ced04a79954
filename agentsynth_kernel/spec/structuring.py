"""One strict cattrs converter for specs, and ``structure``: data -> attrs objects or a SpecError
with one ``path: what was expected`` line per problem."""

from __future__ import annotations

import math
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import cattrs
from cattrs.cols import list_structure_factory
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError, IterableValidationError
from cattrs.v import format_exception, transform_error

from ..errors import AgentsynthError, SpecError, did_you_mean
from .hints import Bounds, _describe, _markers
from .schema import Budget, ComponentSpec, Pack, RunSpec, Task


class InvalidValue(ValueError):
    """A value error whose message is shown to the user as is."""



def _strict(kind: type, label: str) -> Callable[[Any, type], Any]:
    def hook(value: Any, _: type) -> Any:
        # bool is an int in Python, but `trials: yes` is a mistake, not 1.
        if isinstance(value, bool) and kind is not bool:
            raise InvalidValue(f"expected {label}, got a boolean")
        if kind is float and isinstance(value, int):
            return float(value)
        if not isinstance(value, kind):
            raise InvalidValue(f"expected {label}, got {_describe(value)}")
        if isinstance(value, float) and math.isnan(value):
            raise InvalidValue(f"expected {label}, got nan")
        if isinstance(value, dict):
            _string_keys(value)
        return value

    return hook



def _structure_component(value: Any, _: type) -> ComponentSpec:
    if isinstance(value, str):
        return ComponentSpec(value, {})
    if not isinstance(value, Mapping):
        raise InvalidValue(f"expected a mapping with a 'type:' key (or a type name), got {_describe(value)}")
    if "type" not in value:
        raise InvalidValue("missing required key 'type'")
    kind = value["type"]
    if not isinstance(kind, str) or not kind:
        raise InvalidValue(f"'type' must be a name, got {_describe(kind)}")
    return ComponentSpec(kind, {k: v for k, v in _string_keys(value).items() if k != "type"})


def _mapping(value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidValue(f"expected a mapping, got {_describe(value)}")
    return _string_keys(value)


def _string_keys(value: Mapping[Any, Any]) -> Mapping[str, Any]:
    for key in value:
        if not isinstance(key, str):
            raise InvalidValue(f"expected a mapping with string keys, got the key {_describe(key)}")
    return value


def _structure_tier(value: Any, _: type) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InvalidValue(f"expected a name or number, got {_describe(value)}")
    return str(value)


def _make_converter() -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=True)
    conv.register_structure_hook(str, _strict(str, "a string"))
    conv.register_structure_hook(int, _strict(int, "an integer"))
    conv.register_structure_hook(float, _strict(float, "a number"))
    conv.register_structure_hook(bool, _strict(bool, "true or false"))
    conv.register_structure_hook(ComponentSpec, _structure_component)
    conv.register_structure_hook(Path, lambda v, _: Path(_strict(str, "a path")(v, str)))
    # cattrs would happily turn `args: "abc"` into ['a', 'b', 'c']: a list field takes lists only.
    def strict_list(type_: Any, conv_: cattrs.Converter) -> Callable[[Any, Any], Any]:
        inner = list_structure_factory(type_, conv_)

        def hook(value: Any, t: Any) -> Any:
            if not isinstance(value, (list, tuple)):
                raise InvalidValue(f"expected a list, got {_describe(value)}")
            return inner(value, t)

        return hook

    conv.register_structure_hook_factory(lambda t: getattr(t, "__origin__", None) is list, strict_list)
    mapping_hook = _strict(dict, "a mapping")
    conv.register_structure_hook_func(lambda t: t == dict[str, Any], mapping_hook)
    return conv


converter = _make_converter()


def _strict_attrs(cls: type, **overrides: Any) -> None:
    """Structure ``cls`` from a mapping only, forbidding unknown keys (with field overrides)."""
    fn: Callable[..., Any] = cattrs.gen.make_dict_structure_fn(cls, converter, _cattrs_forbid_extra_keys=True, **overrides)

    def hook(value: Any, type_: type) -> Any:
        return fn(_mapping(value), type_)

    converter.register_structure_hook(cls, hook)


# `tier: 1` and `tier: easy` are both fine.
_strict_attrs(Task, tier=cattrs.gen.override(struct_hook=_structure_tier))
for _cls in (Pack, Budget, RunSpec):
    _strict_attrs(_cls)


def _format(exc: BaseException, type_: type | None) -> str:
    if isinstance(exc, InvalidValue):
        return str(exc)
    if type(exc) is ValueError and str(exc):  # a spec_cls's own check (cattrs would say "invalid value")
        return f"ValueError: {exc}"
    if isinstance(exc, KeyError):
        return "missing required key"
    if isinstance(exc, ForbiddenExtraKeysError):
        names = [f.name for f in attrs.fields(exc.cl) if f.init] if attrs.has(exc.cl) else []
        # one "<key>\t<message>" line per key; _paths appends the key to the path
        return "\n".join(f"{k}\tunknown key{did_you_mean(k, names)}" for k in sorted(exc.extra_fields))
    if isinstance(exc, AttributeError) and str(exc).endswith("has no attribute 'items'"):
        return "expected a mapping"
    return format_exception(exc, type_)


def _paths(messages: list[str], prefix: str = "") -> list[str]:
    """``msg @ $.a[0].b`` -> ``a[0].b: msg`` (prefixed), the shape every agentsynth error has."""
    out = []
    for message in messages:
        text, _, where = message.rpartition(" @ ")
        if not _:
            text, where = message, "$"
        where = where.removeprefix("$").removeprefix(".")
        if prefix:
            where = f"{prefix}.{where}" if where and not where.startswith("[") else f"{prefix}{where}"
        for line in text.split("\n"):
            key, tab, rest = line.partition("\t")
            path, line_text = (f"{where}.{key}" if where else key, rest) if tab else (where, line)
            out.append(f"{path}: {line_text}" if path else line_text)
    return out


def _field_bounds(obj: Any, where: str) -> list[str]:
    """Problems with ``Annotated[..., Bounds(...)]`` fields of an attrs object (a plugin's
    ``spec_cls``): the same check factory parameters get, which structuring alone skips."""
    if not attrs.has(type(obj)):
        return []
    try:
        hints = typing.get_type_hints(type(obj), include_extras=True)
    except Exception:  # an unresolvable annotation: not checked
        return []
    problems = []
    for field in attrs.fields(type(obj)):
        for marker in _markers(hints.get(field.name)):
            if isinstance(marker, Bounds):
                problem = marker.problem(getattr(obj, field.name))
                if problem:
                    problems.append(f"{where}.{field.name}: expected {problem}" if where else f"{field.name}: expected {problem}")
    return problems


def structure(data: Any, cls: type, *, source: str, prefix: str = "") -> Any:
    """Structure ``data`` into ``cls`` or raise SpecError with one path-qualified line per problem."""
    try:
        obj: Any = converter.structure(data, cls)
    except (ClassValidationError, IterableValidationError) as exc:
        raise SpecError(source, _paths(transform_error(exc, format_exception=_format), prefix)) from None
    except (InvalidValue, TypeError, ValueError, AgentsynthError) as exc:  # incl. a spec_cls's own checks
        text = str(exc) if isinstance(exc, (InvalidValue, AgentsynthError)) else f"{type(exc).__name__}: {exc}"
        raise SpecError(source, [f"{prefix}: {text}" if prefix else text]) from None
    bounds = _field_bounds(obj, prefix)
    if bounds:
        raise SpecError(source, bounds)
    return obj



converter.register_unstructure_hook(ComponentSpec, ComponentSpec.to_dict)


def unstructure(obj: Any) -> Any:
    """A spec object as plain data (for the run store and reports)."""
    return converter.unstructure(obj)


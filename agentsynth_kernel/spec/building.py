"""Building a component from its spec: the registered factory, called with its structured
parameters and the context values it declares."""

from __future__ import annotations

import functools
import inspect
from typing import Any

import attrs

from ..plugins import PluginHost, get_host
from .schema import ComponentSpec
from .structuring import structure


@functools.lru_cache(maxsize=1024)
def _parameter_names(factory: Any) -> frozenset[str]:
    """The keyword names a factory takes (cached: build() runs for every component of every episode)."""
    try:
        return frozenset(inspect.signature(factory).parameters)
    except (TypeError, ValueError):
        return frozenset()


# id(ComponentSpec) -> (that ComponentSpec, its params structured into a *frozen* spec_cls instance).
# A pack's component specs are built again for every episode; structuring them once is enough.
_structured_cache: dict[int, tuple[ComponentSpec, type, Any]] = {}


def _structured(cspec: ComponentSpec, spec_cls: type, source: str) -> Any:
    cached = _structured_cache.get(id(cspec))
    if cached is not None and cached[0] is cspec and cached[1] is spec_cls:
        return cached[2]
    spec = structure(cspec.params, spec_cls, source=source)
    if _is_frozen(type(spec)) and len(_structured_cache) < 4096:  # a mutable spec could be changed by its factory
        _structured_cache[id(cspec)] = (cspec, spec_cls, spec)
    return spec


@attrs.frozen
class _FrozenReference:
    """attrs gives every frozen class (and its subclasses) this one ``__setattr__``, the one that
    raises FrozenInstanceError: comparing with it asks the class, without trying to write."""


def _is_frozen(cls: type) -> bool:
    """Whether instances of an attrs class refuse every attribute assignment (a class with only some
    fields frozen does not: its factory could still change the others)."""
    return attrs.has(cls) and getattr(cls, "__setattr__", None) is _FrozenReference.__setattr__


def build(kind: str, cspec: ComponentSpec, *, host: PluginHost | None = None, **context: Any) -> Any:
    """Build a component from its spec. Context values (``base_dir``, ``task``, ``pack``, ``run``) are
    passed only to factories that declare them. The object is stamped with what built it, so a
    run can be rebuilt from its records (``__agentsynth_info__``)."""
    host = host or get_host()
    reg = host.get(kind, cspec.type)
    spec_cls, factory = reg.spec_cls, reg.factory  # each resolved and checked once
    if spec_cls is not None:
        args: tuple[Any, ...] = (_structured(cspec, spec_cls, f"{kind} {cspec.type!r}"),)
        kwargs: dict[str, Any] = {}
    else:
        args, kwargs = (), dict(cspec.params)
    accepted = _parameter_names(factory)
    for key, value in context.items():
        if key in accepted and value is not None:
            kwargs[key] = value
    component = factory(*args, **kwargs)
    try:
        component.__agentsynth_info__ = {"plugin": reg.plugin, "kind": kind, "name": reg.name, "params": cspec.params}
    except (AttributeError, TypeError):  # slotted or builtin objects cannot be stamped
        pass
    return component

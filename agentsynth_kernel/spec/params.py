"""Checking a component's ``type:`` and parameters against what its plugin registered: its
``spec_cls`` or its factory's signature and annotations."""

from __future__ import annotations

import inspect
from pathlib import Path

from ..errors import PluginError, SpecError, did_you_mean
from ..importing import CodeRef, absolute_code_ref, code_ref_problem
from ..plugins import PluginHost, Registration
from .hints import _markers, _parameter_hints, _type_problems
from .schema import ComponentSpec
from .structuring import structure

CONTEXT_PARAMS = ("base_dir", "task", "pack", "run")


def check_component(kind: str, cspec: ComponentSpec, where: str, host: PluginHost,
                    base_dir: Path | None = None) -> list[str]:
    """Check that ``type:`` is registered and the parameters fit its factory: names, types and
    bounds from its spec_cls or its annotations; code references (``CodeRef``) must exist,
    relative to ``base_dir`` (the folder of the file that names the component)."""
    try:
        reg = host.get(kind, cspec.type)
        _ = (reg.spec_cls, reg.factory)  # a "module:attribute" that does not import is one problem of many
    except KeyError as exc:
        return [f"{where}.type: {exc.args[0]}"]
    except PluginError as exc:
        return [f"{where}.type: {exc}"]
    if reg.spec_cls is not None:
        try:
            structure(cspec.params, reg.spec_cls, source="", prefix=where)
        except SpecError as exc:
            return [m.removeprefix(": ") for m in exc.messages]
        return []
    problems = _check_signature(reg, cspec, where)
    try:
        hints = _parameter_hints(reg.factory)
    except TypeError:  # an unhashable factory object: not cached, not checked
        hints = {}
    for key, value in cspec.params.items():
        hint = hints.get(key)
        if hint is None:
            continue
        problems += _type_problems(value, hint, f"{where}.{key}")
        if isinstance(value, str) and CodeRef in _markers(hint):
            problem = code_ref_problem(value, base_dir)
            if problem:
                problems.append(f"{where}.{key}: {problem}")
    return problems


def _check_signature(reg: Registration, cspec: ComponentSpec, where: str) -> list[str]:
    try:
        sig = inspect.signature(reg.factory)
    except (TypeError, ValueError):
        return []
    params = {n: p for n, p in sig.parameters.items() if n not in CONTEXT_PARAMS}
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    named = [
        n for n, p in params.items()
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    ]
    problems = []
    if not takes_any:
        for key in cspec.params:
            if key not in named:
                problems.append(f"{where}.{key}: unknown key for {reg.kind} {reg.name!r}{did_you_mean(key, named)}")
    for name in named:
        if params[name].default is inspect.Parameter.empty and name not in cspec.params:
            problems.append(f"{where}.{name}: missing required key for {reg.kind} {reg.name!r}")
    return problems



def absolute_code_refs(kind: str, cspec: ComponentSpec, base_dir: Path, host: PluginHost) -> ComponentSpec:
    """``cspec`` with its relative ``file.py:attr`` parameters (those marked ``CodeRef``) made
    absolute against ``base_dir``, so they resolve the same wherever the pack lives."""
    try:
        reg = host.get(kind, cspec.type)
        hints = {} if reg.spec_cls is not None else _parameter_hints(reg.factory)
    except (KeyError, TypeError):
        return cspec
    params = {
        key: absolute_code_ref(value, base_dir)
        if isinstance(value, str) and key in hints and CodeRef in _markers(hints[key]) else value
        for key, value in cspec.params.items()
    }
    return cspec if params == cspec.params else ComponentSpec(cspec.type, params)

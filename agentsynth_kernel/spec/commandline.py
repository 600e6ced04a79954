"""Component specs as given on a command line (``--policy NAME,key=value``, inline YAML, a file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import SpecError
from .loader import read_yaml
from .schema import ComponentSpec
from .structuring import structure


def parse_component(text: str, *, option: str = "--policy") -> Any:
    """A ComponentSpec (a policy, an executor ...) as given on a command line: ``NAME``, ``NAME,key=value,...``, inline YAML ``{type: ..., ...}``
    or a YAML file holding such a mapping."""
    import yaml


    text = text.strip()
    if not text:
        raise SpecError(option, ["expected a policy name, e.g. 'oracle'"])
    path = Path(text)
    if path.suffix in (".yaml", ".yml", ".json") and path.is_file():
        data = read_yaml(path)
        if isinstance(data, dict) and "policy" in data and "type" not in data:
            data = data["policy"]
        return structure(data, ComponentSpec, source=str(path), prefix="policy")
    if text.startswith("{"):
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise SpecError(option, [f"invalid inline YAML: {getattr(exc, 'problem', exc)}"]) from None
        return _absolute_files(structure(data, ComponentSpec, source=option))
    name, *pairs = [p.strip() for p in text.split(",")]
    params: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SpecError(option, [f"{pair!r}: expected key=value (e.g. 'llm,model=openai/gpt-4o-mini')"])
        try:
            params[key.strip()] = yaml.safe_load(value) if value else ""
        except yaml.YAMLError:
            params[key.strip()] = value
    return _absolute_files(ComponentSpec(name, params))


def _absolute_files(cspec: Any) -> Any:
    """``function: agent.py:act`` given on the command line means agent.py in the current directory."""
    function = cspec.params.get("function")
    if isinstance(function, str) and ".py:" in function:
        file, _, attr = function.rpartition(":")
        if not Path(file).is_absolute() and Path(file).is_file():
            return ComponentSpec(cspec.type, {**cspec.params, "function": f"{Path(file).resolve()}:{attr}"})
    return cspec

"""Bring your own loop: drive an agentsynth environment from the OpenAI or Anthropic tool-calling
shapes your agent (OpenAI SDK, Anthropic SDK, LangGraph, ...) already speaks.

::

    tools = to_openai_tools(env)                      # for chat.completions(tools=...)
    for call in message.tool_calls:                   # SDK objects or plain dicts
        try:
            action = action_from_openai_tool_call(call, tools=env.tools())
        except InvalidToolCall as exc:                # bad JSON, unknown tool, schema-invalid
            messages.append(openai_tool_result(exc.call_id, exc.observation()))
            continue
        obs = env.step(action)
        messages.append(openai_tool_result(action.id, obs))

The same for Anthropic: :func:`to_anthropic_tools`, :func:`action_from_anthropic_tool_use`,
:func:`anthropic_tool_result`. :func:`validate_arguments` is the small JSON-Schema checker the
``llm`` policy uses on tool arguments.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .records import Observation, ToolCall, ToolSpec

__all__ = [
    "InvalidToolCall", "action_from_anthropic_tool_use", "action_from_openai_tool_call", "anthropic_tool_result",
    "observation_text", "openai_tool_result", "parse_arguments", "to_anthropic_tools", "to_openai_tools",
    "tool_specs", "validate_arguments",
]


class InvalidToolCall(ValueError):
    """A tool call that cannot be executed: bad JSON arguments, an unknown tool or arguments that
    do not fit the tool's schema. ``observation()`` is the error the agent should see."""

    def __init__(self, message: str, *, call_id: str = "", name: str = "", raw_arguments: Any = None,
                 reason: str = "invalid") -> None:
        super().__init__(message)
        self.call_id, self.name, self.raw_arguments, self.reason = call_id, name, raw_arguments, reason

    def observation(self) -> Observation:
        return Observation(f"error: {self}", error=True)


# --- tools ----------------------------------------------------------------------------------------


def tool_specs(env_or_tools: Any) -> list[ToolSpec]:
    """ToolSpecs from an environment (its sync ``tools()``), ToolSpecs, or OpenAI/Anthropic tool dicts."""
    tools = env_or_tools
    if callable(getattr(env_or_tools, "tools", None)):
        tools = env_or_tools.tools()
        if inspect.isawaitable(tools):
            close = getattr(tools, "close", None)
            if close is not None:
                close()
            raise TypeError("this environment's tools() is async: pass `await env.tools()` instead of the env")
    out = []
    for tool in tools:
        if isinstance(tool, ToolSpec):
            out.append(tool)
        elif isinstance(tool, Mapping):
            fn = tool.get("function", tool)
            schema = fn.get("parameters", fn.get("input_schema", {"type": "object", "properties": {}}))
            out.append(ToolSpec(fn["name"], fn.get("description", ""), dict(schema)))
        else:
            raise TypeError(f"expected a ToolSpec or a tool dict, got {type(tool).__name__}")
    return out


def to_openai_tools(env_or_tools: Any) -> list[dict[str, Any]]:
    """The ``tools=[...]`` of an OpenAI chat-completions request."""
    return [t.to_openai() for t in tool_specs(env_or_tools)]


def to_anthropic_tools(env_or_tools: Any) -> list[dict[str, Any]]:
    """The ``tools=[...]`` of an Anthropic messages request."""
    return [t.to_anthropic() for t in tool_specs(env_or_tools)]


# --- calls ----------------------------------------------------------------------------------------


def _get(obj: Any, key: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key, default)
    return getattr(obj, key, default)


def parse_arguments(raw: Any, *, call_id: str = "", name: str = "") -> dict[str, Any]:
    """Tool arguments as a dict: a JSON object string, a mapping, or empty (= ``{}``)."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    if isinstance(raw, Mapping):
        return dict(raw)
    if not isinstance(raw, str):
        raise InvalidToolCall(f"arguments of {name!r} must be a JSON object, got {type(raw).__name__}",
                              call_id=call_id, name=name, raw_arguments=raw, reason="bad_json")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidToolCall(f"arguments of {name!r} are not valid JSON ({exc.msg} at position {exc.pos}): "
                              f"{raw[:200]}", call_id=call_id, name=name, raw_arguments=raw, reason="bad_json") from None
    if not isinstance(value, dict):
        raise InvalidToolCall(f"arguments of {name!r} must be a JSON object, got {type(value).__name__}",
                              call_id=call_id, name=name, raw_arguments=raw, reason="bad_json")
    return value


def _check(name: str, call_id: str, arguments: dict[str, Any], raw: Any, tools: Iterable[Any] | None) -> None:
    if tools is None:
        return
    specs = {t.name: t for t in tool_specs(tools)}
    spec = specs.get(name)
    if spec is None:
        raise InvalidToolCall(f"unknown tool {name!r}; available tools: {', '.join(sorted(specs))}",
                              call_id=call_id, name=name, raw_arguments=raw, reason="unknown_tool")
    problems = validate_arguments(spec.parameters, arguments)
    if problems:
        raise InvalidToolCall(f"invalid arguments for {name!r}: " + "; ".join(problems), call_id=call_id,
                              name=name, raw_arguments=raw, reason="schema")


def action_from_openai_tool_call(call: Any, *, tools: Iterable[Any] | None = None) -> ToolCall:
    """A ToolCall from an OpenAI tool call (a dict, an SDK object or an LLMToolCall).

    Raises InvalidToolCall for bad JSON, and, when ``tools`` are given, for an unknown tool or
    schema-invalid arguments.
    """
    call_id = str(_get(call, "id", "") or "")
    fn = _get(call, "function", None)
    if fn is None:  # flat shape: LLMToolCall(id, name, arguments)
        fn = call
    name = str(_get(fn, "name", "") or "")
    raw = _get(fn, "arguments", None)
    arguments = parse_arguments(raw, call_id=call_id, name=name)
    _check(name, call_id, arguments, raw, tools)
    return ToolCall(name, arguments, id=call_id)


def action_from_anthropic_tool_use(block: Any, *, tools: Iterable[Any] | None = None) -> ToolCall:
    """A ToolCall from an Anthropic ``tool_use`` content block (a dict or an SDK object)."""
    kind = _get(block, "type", "tool_use")
    if kind != "tool_use":
        raise InvalidToolCall(f"expected a tool_use block, got {kind!r}", reason="not_tool_use")
    call_id = str(_get(block, "id", "") or "")
    name = str(_get(block, "name", "") or "")
    raw = _get(block, "input", None)
    arguments = parse_arguments(raw, call_id=call_id, name=name)
    _check(name, call_id, arguments, raw, tools)
    return ToolCall(name, arguments, id=call_id)


# --- results --------------------------------------------------------------------------------------


def observation_text(observation: Observation | str) -> str:
    """What the model reads for an observation (errors are marked as such)."""
    if isinstance(observation, str):
        return observation
    text = observation.content
    if observation.error and not text.lower().startswith("error"):
        text = f"error: {text}"
    return text


def openai_tool_result(call_id: str, observation: Observation | str) -> dict[str, Any]:
    """The ``{"role": "tool", ...}`` message answering one OpenAI tool call."""
    return {"role": "tool", "tool_call_id": call_id, "content": observation_text(observation)}


def anthropic_tool_result(tool_use_id: str, observation: Observation | str) -> dict[str, Any]:
    """The ``tool_result`` content block answering one Anthropic tool_use (put it in a user message)."""
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id, "content": observation_text(observation)}
    if isinstance(observation, Observation) and observation.error:
        block["is_error"] = True
    return block


# --- JSON Schema (the subset tool schemas use) ----------------------------------------------------

_TYPES: dict[str, Any] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool) or (isinstance(v, float) and v.is_integer()),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
}


def validate_arguments(schema: Mapping[str, Any], value: Any, path: str = "") -> list[str]:
    """Problems of ``value`` against a JSON Schema, one ``path: message`` per problem.

    Covers what tool schemas use: ``type`` (also lists), ``properties``, ``required``,
    ``additionalProperties`` (bool or schema), ``items``, ``enum``, ``const``, ``minimum``/
    ``maximum`` (and exclusive), ``minLength``/``maxLength``, ``pattern``, ``minItems``/
    ``maxItems``, ``anyOf``/``oneOf``/``allOf``. Unknown keywords are ignored (permissive).
    """
    where = path or "arguments"
    if not isinstance(schema, Mapping) or not schema:
        return []
    problems: list[str] = []
    kind = schema.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        if not any(_TYPES.get(k, lambda v: True)(value) for k in kinds):
            return [f"{where}: expected {' or '.join(map(str, kinds))}, got {_describe(value)}"]
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{where}: {value!r} is not one of {schema['enum']!r}")
    if "const" in schema and value != schema["const"]:
        problems.append(f"{where}: expected {schema['const']!r}")
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, Sequence) and options:
            matches = sum(1 for option in options if not validate_arguments(option, value, path))
            if matches == 0 or (key == "oneOf" and matches > 1):
                problems.append(f"{where}: does not match {'exactly one' if key == 'oneOf' else 'any'} of the allowed schemas")
    for option in schema.get("allOf", ()) or ():
        problems += validate_arguments(option, value, path)
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for name in schema.get("required", ()) or ():
            if name not in value:
                problems.append(f"{_join(path, name)}: missing required argument")
        extra = schema.get("additionalProperties", True)
        for name, item in value.items():
            if name in props:
                problems += validate_arguments(props[name], item, _join(path, name))
            elif extra is False:
                problems.append(f"{_join(path, name)}: unknown argument (allowed: {', '.join(sorted(props)) or 'none'})")
            elif isinstance(extra, Mapping):
                problems += validate_arguments(extra, item, _join(path, name))
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i, item in enumerate(value):
                problems += validate_arguments(items, item, f"{where}[{i}]")
        if "minItems" in schema and len(value) < schema["minItems"]:
            problems.append(f"{where}: needs at least {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            problems.append(f"{where}: allows at most {schema['maxItems']} items")
    elif isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            problems.append(f"{where}: shorter than {schema['minLength']} characters")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            problems.append(f"{where}: longer than {schema['maxLength']} characters")
        pattern = schema.get("pattern")
        if isinstance(pattern, str):
            try:
                if not re.search(pattern, value):
                    problems.append(f"{where}: does not match /{pattern}/")
            except re.error:
                pass
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            problems.append(f"{where}: must be >= {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            problems.append(f"{where}: must be <= {schema['maximum']}")
        if isinstance(schema.get("exclusiveMinimum"), (int, float)) and value <= schema["exclusiveMinimum"]:
            problems.append(f"{where}: must be > {schema['exclusiveMinimum']}")
        if isinstance(schema.get("exclusiveMaximum"), (int, float)) and value >= schema["exclusiveMaximum"]:
            problems.append(f"{where}: must be < {schema['exclusiveMaximum']}")
    return problems


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    names = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}
    return f"{names.get(type(value), type(value).__name__)} {json.dumps(value)[:40]}" if not isinstance(
        value, (dict, list)) else names[type(value)]

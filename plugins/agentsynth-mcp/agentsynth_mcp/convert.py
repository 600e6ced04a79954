"""MCP results -> agentsynth observations and plain values.

Text blocks become the observation's text. Images, audio and binary resources
never enter a trajectory as base64: they become references (kind, MIME type,
size, sha256, and a file path when the environment saves media), so
trajectories stay small and exportable. Structured content is kept as data
for checkers and exporters.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import mimetypes
import re
from pathlib import Path
from typing import Any

from agentsynth_kernel import Observation, ToolSpec

EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def agent_tool_names(names: list[str]) -> dict[str, str]:
    """MCP tool name -> the name the agent sees. MCP allows ``.`` and up to 128 characters; OpenAI
    function names are ``[A-Za-z0-9_-]{1,64}``. Valid names are kept; others are rewritten
    (``github.create_issue`` -> ``github_create_issue``) and made unique."""
    out: dict[str, str] = {}
    taken = {n for n in names if not _UNSAFE.search(n) and len(n) <= 64}
    for name in names:
        if name in taken:
            out[name] = name
            continue
        base = _UNSAFE.sub("_", name)[:60] or "tool"
        candidate, i = base, 2
        while candidate in taken:
            candidate, i = f"{base[:57]}_{i}", i + 1
        taken.add(candidate)
        out[name] = candidate
    return out


def tool_spec(tool: Any, name: str | None = None) -> ToolSpec:
    """An MCP Tool as an agentsynth ToolSpec (under ``name`` if given); the input JSON Schema is
    passed through."""
    schema = dict(tool.input_schema or EMPTY_SCHEMA)
    schema.setdefault("type", "object")
    if schema.get("type") == "object":
        schema.setdefault("properties", {})
    description = tool.description or getattr(tool, "title", None) or ""
    hint = getattr(getattr(tool, "annotations", None), "read_only_hint", None)  # the server's own word
    return ToolSpec(name or tool.name, description, schema, read_only=hint if isinstance(hint, bool) else None)


class MediaStore:
    """Where binary blocks go: nowhere (reference only) or a directory, named by content hash."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory

    def reference(self, kind: str, mime: str | None, b64: str) -> tuple[str, dict[str, Any]]:
        try:
            raw = base64.b64decode(b64, validate=False)
        except (binascii.Error, ValueError):
            raw = b64.encode()
        digest = hashlib.sha256(raw).hexdigest()
        ref: dict[str, Any] = {"type": kind, "mime_type": mime or "", "bytes": len(raw), "sha256": digest}
        saved = ""
        if self.directory is not None:
            ext = mimetypes.guess_extension(mime or "") or ".bin"
            path = self.directory / f"{digest[:16]}{ext}"
            if not path.exists():
                self.directory.mkdir(parents=True, exist_ok=True)
                path.write_bytes(raw)
            ref["path"] = str(path)
            saved = f", saved to {path}"
        text = f"[{kind} {mime or 'application/octet-stream'}, {len(raw)} bytes, sha256:{digest[:16]}{saved}]"
        return text, ref


def render_blocks(blocks: list[Any], media: MediaStore) -> tuple[list[str], list[dict[str, Any]]]:
    """Content blocks -> text parts and media references."""
    parts: list[str] = []
    refs: list[dict[str, Any]] = []
    for block in blocks or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            text, ref = media.reference(kind, block.mime_type, block.data)
            parts.append(text)
            refs.append(ref)
        elif kind == "resource_link":
            label = f" ({block.name})" if getattr(block, "name", "") else ""
            parts.append(f"[resource {block.uri}{label}]")
            refs.append({"type": "resource_link", "uri": str(block.uri), "name": getattr(block, "name", "")})
        elif kind == "resource":
            text, ref = render_resource_contents(block.resource, media)
            parts.append(text)
            if ref is not None:
                refs.append(ref)
        else:  # a block type this client does not know: keep it readable
            dump = block.model_dump(mode="json", exclude_none=True) if hasattr(block, "model_dump") else block
            parts.append(json.dumps(dump, default=str)[:2000])
    return parts, refs


def render_resource_contents(contents: Any, media: MediaStore) -> tuple[str, dict[str, Any] | None]:
    text = getattr(contents, "text", None)
    if text is not None:
        return text, None
    ref_text, ref = media.reference("blob", getattr(contents, "mime_type", None), getattr(contents, "blob", ""))
    ref["uri"] = str(contents.uri)
    return f"{ref_text} from {contents.uri}", ref


def truncate(text: str, limit: int) -> str:
    if limit > 0 and len(text) > limit:
        return text[:limit] + f"\n... [truncated {len(text) - limit} characters]"
    return text


def tool_observation(result: Any, media: MediaStore, max_chars: int) -> Observation:
    """A CallToolResult as the agent's observation; ``isError`` -> ``error=True``."""
    parts, refs = render_blocks(result.content, media)
    structured = result.structured_content
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False, default=str))
    data: dict[str, Any] = {"is_error": bool(result.is_error)}
    if structured is not None:
        data["structured"] = structured
    if refs:
        data["media"] = refs
    text = "\n".join(parts) if parts else ("(error with no message)" if result.is_error else "(no output)")
    return Observation(truncate(text, max_chars), error=bool(result.is_error), data=data)


def resource_observation(uri: str, result: Any, media: MediaStore, max_chars: int) -> Observation:
    parts: list[str] = []
    refs: list[dict[str, Any]] = []
    for contents in result.contents:
        text, ref = render_resource_contents(contents, media)
        parts.append(text)
        if ref is not None:
            refs.append(ref)
    data: dict[str, Any] = {"uri": uri}
    if refs:
        data["media"] = refs
    return Observation(truncate("\n".join(parts) or "(empty resource)", max_chars), data=data)


def _maybe_json(text: str) -> Any:
    stripped = text.strip()
    if stripped[:1] in ("{", "[", '"') or stripped in ("true", "false", "null") or _is_number(stripped):
        try:
            return json.loads(stripped)
        except ValueError:
            return text
    return text


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def result_value(result: Any) -> Any:
    """The value a checker compares: structured content if any, else the text (parsed as JSON when
    it is JSON). Several text blocks give a list."""
    structured = getattr(result, "structured_content", None)
    if structured is not None:
        # MCPServer (FastMCP) wraps a non-object return value as {"result": value}; the text
        # block then holds the bare value. Unwrap only in that case.
        if isinstance(structured, dict) and list(structured) == ["result"]:
            texts = [b.text for b in result.content or [] if getattr(b, "type", "") == "text"]
            if len(texts) == 1 and _maybe_json(texts[0]) != structured:
                return structured["result"]
        return structured
    if hasattr(result, "contents"):  # ReadResourceResult
        texts = [getattr(c, "text", None) for c in result.contents]
    else:
        texts = [getattr(b, "text", None) for b in result.content or [] if getattr(b, "type", "") == "text"]
    values = [_maybe_json(t) for t in texts if t is not None]
    if not values:
        return None
    return values[0] if len(values) == 1 else values


def result_text(result: Any) -> str:
    """All text of a result (for contains / regex)."""
    if hasattr(result, "contents"):
        return "\n".join(getattr(c, "text", "") or "" for c in result.contents)
    texts = [b.text for b in result.content or [] if getattr(b, "type", "") == "text"]
    if not texts and getattr(result, "structured_content", None) is not None:
        return json.dumps(result.structured_content, ensure_ascii=False, default=str)
    return "\n".join(texts)

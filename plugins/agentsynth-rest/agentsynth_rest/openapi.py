"""An OpenAPI 3.x document as tools: one tool per operation.

The tool's name is the operation's ``operationId`` (made safe for every LLM API: letters,
digits, ``_`` and ``-``, at most 64 characters), else ``METHOD_path``. Its JSON-schema
parameters merge the operation's path, query and header parameters with the properties of
its JSON request body (a body that is not an object, or whose property names collide with a
parameter, is one ``body`` argument instead). Every argument remembers where it goes
(:class:`Argument`), so a call is built from the operation, never from what the agent names.
Only local ``$ref`` s (``#/components/...``) are followed; a cycle or a remote reference is an
error of the document.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs
import yaml

METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
# headers a tool may never set: they would redirect the request, forge credentials, or break framing
FORBIDDEN_HEADERS = frozenset({
    "host", "authorization", "proxy-authorization", "cookie", "content-length", "transfer-encoding",
    "connection", "keep-alive", "upgrade", "te", "trailer", "expect", "forwarded", "x-forwarded-for",
    "x-forwarded-host", "x-forwarded-proto", "x-http-method-override", "x-method-override", "x-real-ip",
    "proxy-connection",
    # what frameworks take as the method, the path or the client instead of the request line's
    "x-http-method", "x-original-method", "x-original-url", "x-rewrite-url", "x-original-host", "x-host",
    "x-forwarded-port", "x-forwarded-prefix", "x-forwarded-server", "x-forwarded-scheme", "x-forwarded-ssl",
    "x-client-ip", "true-client-ip", "x-cluster-client-ip", "via",
    # the framing and decoding of the body: the client's (an agent's 'br' would be inflated unbounded)
    "accept-encoding", "content-encoding", "content-type",
})
_NAME_BAD = re.compile(r"[^A-Za-z0-9_-]+")
MAX_REF_DEPTH = 32


class OpenAPIError(ValueError):
    """The document cannot be used; the message names the document and the place inside it."""


@attrs.frozen
class Argument:
    """One tool argument and where its value goes: ``path`` / ``query`` / ``header`` (``name`` is
    the wire name), ``body`` (a property of the JSON body) or ``whole_body``."""

    key: str
    location: str
    name: str
    schema: dict[str, Any]
    required: bool = False


@attrs.frozen
class Operation:
    """One operation of the document, as a tool."""

    tool: str
    method: str
    path: str
    operation_id: str
    summary: str
    arguments: tuple[Argument, ...]
    parameters: dict[str, Any]  # the tool's JSON schema
    has_body: bool = False

    @property
    def label(self) -> str:
        return f"{self.method.upper()} {self.path}"


def load_document(source: str, *, base_dir: Path, fetch: Any = None) -> tuple[dict[str, Any], str]:
    """(document, where it came from) from a file (JSON or YAML) or an ``http(s)://`` URL on the
    loopback (``fetch(url) -> bytes``)."""
    if source.startswith(("http://", "https://")):
        if fetch is None:
            raise OpenAPIError(f"openapi: {source}: cannot fetch a URL here")
        raw = fetch(source)
        where = source
    else:
        path = Path(source)
        if not path.is_absolute():
            path = base_dir / path
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise OpenAPIError(f"openapi: {path}: {exc.strerror or exc}") from None
        where = str(path)
    return parse_document(raw, where), where


def parse_document(raw: bytes, where: str) -> dict[str, Any]:
    try:
        data = json.loads(raw) if raw.lstrip()[:1] in (b"{", b"[") else yaml.safe_load(raw)
    except (ValueError, yaml.YAMLError) as exc:
        raise OpenAPIError(f"{where}: not JSON or YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise OpenAPIError(f"{where}: expected an OpenAPI document (a mapping), got {type(data).__name__}")
    version = data.get("openapi")
    if not isinstance(version, str) or not version.startswith("3."):
        raise OpenAPIError(f"{where}: openapi: expected a 3.x version string, got {version!r} "
                           "(Swagger 2.0 documents are not supported)")
    if not isinstance(data.get("paths"), dict):
        raise OpenAPIError(f"{where}: paths: expected a mapping of paths to operations")
    return data


class _Resolver:
    def __init__(self, doc: dict[str, Any], where: str) -> None:
        self.doc, self.where = doc, where

    def ref(self, ref: str, at: str) -> Any:
        if not ref.startswith("#/"):
            raise OpenAPIError(f"{self.where}: {at}: $ref {ref!r}: only local references (#/...) are followed")
        node: Any = self.doc
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or part not in node:
                raise OpenAPIError(f"{self.where}: {at}: $ref {ref!r} points at nothing")
            node = node[part]
        return node

    def deref(self, node: Any, at: str) -> Any:
        """``node`` with a top-level ``$ref`` followed (chains too)."""
        seen: list[str] = []
        while isinstance(node, dict) and isinstance(node.get("$ref"), str):
            ref = node["$ref"]
            if ref in seen or len(seen) > MAX_REF_DEPTH:
                raise OpenAPIError(f"{self.where}: {at}: $ref cycle: {' -> '.join([*seen, ref])}")
            seen.append(ref)
            node = self.ref(ref, at)
        return node

    def schema(self, node: Any, at: str, stack: tuple[str, ...] = ()) -> Any:
        """A schema with every ``$ref`` inlined; a recursive schema is cut to ``{}`` (any value)
        where it recurses, so the tool's schema stays finite."""
        if isinstance(node, list):
            return [self.schema(v, f"{at}[{i}]", stack) for i, v in enumerate(node)]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str):
            if ref in stack or len(stack) > MAX_REF_DEPTH:
                return {}
            return self.schema(self.ref(ref, at), at, (*stack, ref))
        return {k: self.schema(v, f"{at}.{k}", stack) for k, v in node.items()}


def _clean_schema(schema: Any) -> dict[str, Any]:
    """OpenAPI's schema dialect to plain JSON Schema: drop ``nullable``/``example``/``xml``/
    ``readOnly`` etc., which strict tool-calling APIs refuse."""
    if not isinstance(schema, dict):
        return {}
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("nullable", "example", "examples", "xml", "externalDocs", "discriminator", "readOnly",
                   "writeOnly", "deprecated") or key.startswith("x-"):
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {k: _clean_schema(v) for k, v in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = _clean_schema(value)
        elif key in ("allOf", "anyOf", "oneOf") and isinstance(value, list):
            out[key] = [_clean_schema(v) for v in value]
        else:
            out[key] = copy.deepcopy(value)
    if schema.get("nullable") is True and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


def tool_name(operation_id: str | None, method: str, path: str) -> str:
    raw = operation_id or f"{method}_{path}"
    name = re.sub(r"_{2,}", "_", _NAME_BAD.sub("_", raw)).strip("_") or method
    return name[:64]


def operations(doc: dict[str, Any], where: str, *, methods: Iterable[str] = (), include: Iterable[str] = (),
               exclude: Iterable[str] = ()) -> list[Operation]:
    """Every operation of the document that passes the filters, as a tool.

    ``methods``: HTTP methods to keep (empty: all). ``include`` / ``exclude``: operationIds,
    tool names or ``"METHOD /path"`` labels (``include`` empty: all)."""
    resolver = _Resolver(doc, where)
    keep_methods = {m.lower() for m in methods}
    bad = keep_methods - set(METHODS)
    if bad:
        raise OpenAPIError(f"methods: unknown HTTP method(s) {', '.join(sorted(bad))} (expected {', '.join(METHODS)})")
    wanted, unwanted = set(include), set(exclude)
    found: list[Operation] = []
    names: dict[str, str] = {}
    matched: set[str] = set()
    for path, item in doc["paths"].items():
        at = f"paths.{path}"
        if not isinstance(path, str) or not path.startswith("/"):
            raise OpenAPIError(f"{where}: {at}: a path must start with '/'")
        item = resolver.deref(item, at)
        if not isinstance(item, dict):
            raise OpenAPIError(f"{where}: {at}: expected a path item (a mapping)")
        shared = item.get("parameters") or []
        for method in METHODS:
            op = item.get(method)
            if op is None:
                continue
            op_at = f"{at}.{method}"
            if not isinstance(op, dict):
                raise OpenAPIError(f"{where}: {op_at}: expected an operation (a mapping)")
            op_id = op.get("operationId")
            name = tool_name(op_id if isinstance(op_id, str) else None, method, path)
            label = f"{method.upper()} {path}"
            keys = {name, label, *( [op_id] if isinstance(op_id, str) else [])}
            if keep_methods and method not in keep_methods:
                continue
            if wanted and not (keys & wanted):
                continue
            if keys & unwanted:
                matched |= keys & unwanted
                continue
            matched |= keys & wanted
            if name in names:
                raise OpenAPIError(f"{where}: {op_at}: tool name {name!r} is also {names[name]} "
                                   "(give the operations distinct operationIds)")
            names[name] = label
            found.append(_operation(resolver, op, shared, method, path, name, op_at))
    missing = (wanted | unwanted) - matched
    if missing:
        raise OpenAPIError(f"operations: no operation of {where} is named {', '.join(sorted(missing))}")
    return found


def _operation(resolver: _Resolver, op: dict[str, Any], shared: list[Any], method: str, path: str, name: str,
               at: str) -> Operation:
    where = resolver.where
    params: dict[tuple[str, str], dict[str, Any]] = {}
    for i, raw in enumerate([*shared, *(op.get("parameters") or [])]):
        p = resolver.deref(raw, f"{at}.parameters[{i}]")
        if not isinstance(p, dict) or not isinstance(p.get("name"), str) or p.get("in") not in (
                "path", "query", "header", "cookie"):
            raise OpenAPIError(f"{where}: {at}.parameters[{i}]: expected a parameter with 'name' and 'in' "
                               "(path, query, header or cookie)")
        params[(p["in"], p["name"])] = p  # an operation's parameter overrides the path item's
    arguments: list[Argument] = []
    properties: dict[str, Any] = {}
    required: list[str] = []
    for (location, wire), p in params.items():
        if location == "cookie":
            continue  # cookies are the client's session, not the agent's to set
        if location == "header" and wire.lower() in FORBIDDEN_HEADERS:
            continue
        key = wire if location != "header" else _NAME_BAD.sub("_", wire)
        if key in properties:
            key = f"{location}_{key}"
        schema = _clean_schema(resolver.schema(p.get("schema") or {"type": "string"}, f"{at}.{wire}"))
        if p.get("description") and "description" not in schema:
            schema["description"] = str(p["description"])
        is_required = location == "path" or bool(p.get("required"))
        arguments.append(Argument(key, location, wire, schema, is_required))
        properties[key] = schema
        if is_required:
            required.append(key)
    missing_path = set(re.findall(r"{([^}]+)}", path)) - {a.name for a in arguments if a.location == "path"}
    if missing_path:
        raise OpenAPIError(f"{where}: {at}: path parameter(s) {', '.join(sorted(missing_path))} of {path} are not "
                           "declared in 'parameters'")
    has_body = False
    body = resolver.deref(op.get("requestBody"), f"{at}.requestBody")
    if isinstance(body, dict):
        content = body.get("content") or {}
        media = next((v for k, v in content.items() if k.split(";")[0].strip().endswith("json")), None)
        if media is None and content:
            raise OpenAPIError(f"{where}: {at}.requestBody: only JSON bodies are supported, got "
                               f"{', '.join(content)}")
        if media is not None:
            has_body = True
            schema = _clean_schema(resolver.schema(media.get("schema") or {}, f"{at}.requestBody"))
            body_required = bool(body.get("required"))
            props = schema.get("properties") if schema.get("type", "object") == "object" else None
            if isinstance(props, dict) and props and not (set(props) & set(properties)) and "allOf" not in schema:
                inner = set(schema.get("required") or [])
                for key, sub in props.items():
                    is_required = body_required and key in inner
                    arguments.append(Argument(key, "body", key, sub, is_required))
                    properties[key] = sub
                    if is_required:
                        required.append(key)
            else:
                key = "body" if "body" not in properties else "request_body"
                arguments.append(Argument(key, "whole_body", "", schema, body_required))
                properties[key] = schema
                if body_required:
                    required.append(key)
    parameters: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        parameters["required"] = required
    summary = str(op.get("summary") or op.get("description") or "")
    description = f"{method.upper()} {path}" + (f": {summary}" if summary else "")
    return Operation(name, method, path, str(op.get("operationId") or ""), description[:1000], tuple(arguments),
                     parameters, has_body)


def security_header(doc: Mapping[str, Any], scheme: str, where: str) -> tuple[str, str]:
    """(header name, value prefix) of a security scheme of the document: apiKey in a header,
    http bearer or http basic. Other kinds (cookies, OAuth flows) are not supported."""
    schemes = (doc.get("components") or {}).get("securitySchemes") or {}
    found = schemes.get(scheme)
    if not isinstance(found, dict):
        known = ", ".join(sorted(schemes)) or "none"
        raise OpenAPIError(f"{where}: components.securitySchemes has no {scheme!r} (it has: {known})")
    kind = found.get("type")
    if kind == "apiKey" and found.get("in") == "header" and isinstance(found.get("name"), str):
        return found["name"], ""
    if kind == "http" and str(found.get("scheme", "")).lower() == "bearer":
        return "Authorization", "Bearer "
    if kind == "http" and str(found.get("scheme", "")).lower() == "basic":
        return "Authorization", "Basic "
    raise OpenAPIError(f"{where}: securitySchemes.{scheme}: only apiKey-in-header and http bearer/basic schemes "
                       f"can be filled from an environment variable, got {kind!r}")

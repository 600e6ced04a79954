"""``type: mcp``: any MCP server as an agentsynth environment.

One environment instance serves one episode. ``reset`` copies the pack's world
directory (if any) to a fresh temporary directory, starts the server (stdio:
a subprocess; HTTP with ``command``: a subprocess listening on ``{port}``;
HTTP without ``command``: an already running server), connects with the
official ``mcp`` SDK, runs the ``setup`` calls, and discovers tools, resources
and prompts. ``step`` forwards one tool call. ``close`` stops the server and
deletes the copy. A server that hangs or crashes fails the episode with a clear
error (:class:`~agentsynth_mcp.session.McpServerError`) after it was stopped.

Placeholders usable in ``command``, ``args``, ``env`` values, ``cwd``, ``url``
and ``headers`` values: ``{python}`` (this interpreter), ``{base_dir}`` (the
pack's directory), ``{world}`` (this episode's copy of ``world``), ``{workdir}``
(this episode's temporary directory), ``{port}`` (a free TCP port), ``{seed}``.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import attrs

from agentsynth_kernel import Observation, ToolCall, ToolSpec
from agentsynth_kernel.spec import InvalidValue

from .convert import MediaStore, agent_tool_names, resource_observation, tool_observation, tool_spec
from .session import TRANSPORTS, Endpoint, McpServerError, McpSession, ServerInfo, free_port

PLACEHOLDERS = ("python", "base_dir", "world", "workdir", "port", "seed")


def _str_list(value: Any, key: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidValue(f"{key}: expected a list, got {type(value).__name__} {value!r}")
    out = []
    for i, item in enumerate(value):
        if isinstance(item, (dict, list)) or item is None:
            raise InvalidValue(f"{key}[{i}]: expected a string, got {item!r}")
        out.append(str(item))
    return out


def _str_map(value: Any, key: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidValue(f"{key}: expected a mapping, got {type(value).__name__} {value!r}")
    out = {}
    for k, v in value.items():
        if isinstance(v, (dict, list)) or v is None:
            raise InvalidValue(f"{key}.{k}: expected a string, got {v!r}")
        out[str(k)] = str(v).lower() if isinstance(v, bool) else str(v)
    return out


@attrs.define
class McpSpec:
    """The ``environment:`` parameters of ``type: mcp``.

    Give ``command`` (stdio, or an HTTP server started per episode when ``url``
    is also given) or ``url`` (an HTTP server that is already running).
    """

    command: str | None = None
    args: Any = attrs.field(factory=list)
    env: Any = attrs.field(factory=dict)
    cwd: str | None = None
    inherit_env: bool = False
    url: str | None = None
    headers: Any = attrs.field(factory=dict)
    transport: str = "auto"
    protocol: str = "auto"
    world: str | None = None
    setup: Any = attrs.field(factory=list)
    hide_tools: Any = attrs.field(factory=list)
    resource_tool: bool = True
    connect_timeout: float = 20.0
    call_timeout: float = 30.0
    max_output_chars: int = 20000
    media_dir: str | None = None

    def __attrs_post_init__(self) -> None:
        self.args = _str_list(self.args, "args")
        self.hide_tools = _str_list(self.hide_tools, "hide_tools")
        self.env = _str_map(self.env, "env")
        self.headers = _str_map(self.headers, "headers")
        if not isinstance(self.setup, list):
            raise InvalidValue(f"setup: expected a list of {{tool: NAME, arguments: {{...}}}}, got {self.setup!r}")
        for i, call in enumerate(self.setup):
            if not isinstance(call, dict) or not isinstance(call.get("tool"), str):
                raise InvalidValue(f"setup[{i}]: expected {{tool: NAME, arguments: {{...}}}}, got {call!r}")
            unknown = set(call) - {"tool", "arguments"}
            if unknown:
                raise InvalidValue(f"setup[{i}]: unknown key {sorted(unknown)[0]!r} (expected tool, arguments)")
            if not isinstance(call.get("arguments", {}), dict):
                raise InvalidValue(f"setup[{i}].arguments: expected a mapping")
        if self.command is None and self.url is None:
            raise InvalidValue("give 'command' (a server to start) or 'url' (a running HTTP server), or both")
        if self.transport not in ("auto", *TRANSPORTS):
            raise InvalidValue(f"transport: expected one of auto, {', '.join(TRANSPORTS)}, got {self.transport!r}")
        if self.transport == "stdio" and self.url is not None:
            raise InvalidValue("transport: stdio takes 'command', not 'url'")
        if self.transport in ("streamable-http", "sse") and self.url is None:
            raise InvalidValue(f"url: transport {self.transport} needs a 'url'")
        if self.protocol not in ("auto", "legacy"):
            raise InvalidValue(f"protocol: expected auto or legacy, got {self.protocol!r}")
        for key in ("connect_timeout", "call_timeout"):
            if getattr(self, key) <= 0:
                raise InvalidValue(f"{key}: must be positive, got {getattr(self, key)}")

    @property
    def resolved_transport(self) -> str:
        if self.transport != "auto":
            return self.transport
        if self.url is None:
            return "stdio"
        return "sse" if self.url.rstrip("/").endswith("/sse") else "streamable-http"


def expand(text: str, values: dict[str, str]) -> str:
    """Substitute ``{name}`` placeholders (only the known names; other braces stay)."""
    for name, value in values.items():
        text = text.replace("{" + name + "}", value)
    return text


class McpEnvironment:
    """An MCP server as an agentsynth Environment (async methods, run on the engine's loop)."""

    def __init__(self, spec: McpSpec, base_dir: Path | None = None) -> None:
        self.spec = spec
        self.base_dir = Path(base_dir or ".").resolve()
        self.session: McpSession | None = None
        self.info: ServerInfo | None = None
        self.workdir: Path | None = None
        self.world_dir: Path | None = None
        self.resource_tool_name: str | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._tools: list[ToolSpec] = []
        self._to_mcp: dict[str, str] = {}  # agent-visible tool name -> MCP tool name
        self._media = MediaStore()

    # --- Environment protocol ----------------------------------------------------------------

    async def reset(self, seed: int) -> Observation:
        await self.close()
        spec = self.spec
        self._tmp = tempfile.TemporaryDirectory(prefix="agentsynth-mcp-")
        self.workdir = Path(self._tmp.name)
        if spec.world is not None:
            source = self.base_dir / expand(spec.world, {"base_dir": str(self.base_dir)})
            if not source.is_dir():
                raise McpServerError(f"world: {source} is not a directory")
            self.world_dir = self.workdir / "world"
            shutil.copytree(source, self.world_dir, ignore=shutil.ignore_patterns("__pycache__"))
        values = {
            "python": sys.executable,
            "base_dir": str(self.base_dir),
            "world": str(self.world_dir or self.workdir),
            "workdir": str(self.workdir),
            "seed": str(seed),
        }
        everything = " ".join([spec.command or "", spec.url or "", *spec.args, *spec.env.values(),
                               *spec.headers.values(), spec.cwd or ""])
        if "{port}" in everything:
            values["port"] = str(free_port())
        cwd = expand(spec.cwd, values) if spec.cwd else str(self.world_dir or self.base_dir)
        if not Path(cwd).is_absolute():
            cwd = str(self.base_dir / cwd)
        endpoint = Endpoint(
            transport=spec.resolved_transport,
            command=expand(spec.command, values) if spec.command else None,
            args=[expand(a, values) for a in spec.args],
            env={k: expand(v, values) for k, v in spec.env.items()},
            cwd=cwd,
            url=expand(spec.url, values) if spec.url else None,
            headers={k: expand(v, values) for k, v in spec.headers.items()},
            inherit_env=spec.inherit_env,
            protocol=spec.protocol,
        )
        if spec.media_dir:
            media = Path(expand(spec.media_dir, values))
            self._media = MediaStore(media if media.is_absolute() else self.base_dir / media)
        self.session = McpSession(endpoint, connect_timeout=spec.connect_timeout, call_timeout=spec.call_timeout,
                                  log_dir=self.workdir)
        self.info = info = await self.session.start()
        for i, call in enumerate(spec.setup):
            result = await self.session.call_tool(call["tool"], dict(call.get("arguments") or {}))
            if result.is_error:
                obs = tool_observation(result, self._media, 500)
                raise McpServerError(f"setup[{i}]: tool {call['tool']!r} returned an error: {obs.content}")
        names = {t.name for t in info.tools}
        unknown = [n for n in spec.hide_tools if n not in names]
        if unknown:
            raise McpServerError(f"hide_tools: the server has no tool {unknown[0]!r} (tools: {', '.join(sorted(names))})")
        visible = [t for t in info.tools if t.name not in spec.hide_tools]
        exposed = agent_tool_names([t.name for t in visible])
        self._to_mcp = {agent: mcp_name for mcp_name, agent in exposed.items()}
        self._tools = [tool_spec(t, exposed[t.name]) for t in visible]
        self.resource_tool_name = None
        if spec.resource_tool and (info.resources or info.resource_templates):
            name = "read_resource" if "read_resource" not in self._to_mcp else "mcp_read_resource"
            self.resource_tool_name = name
            self._tools.append(self._resource_tool(name, info))
        return Observation(self._intro(info), data=info.summary())

    async def tools(self) -> list[ToolSpec]:
        return list(self._tools)

    async def step(self, call: ToolCall) -> Observation:
        from mcp import MCPError

        session = self._require_session()
        if call.name == self.resource_tool_name:
            uri = call.arguments.get("uri")
            if not isinstance(uri, str) or not uri:
                return Observation(f"error: {call.name} needs a 'uri' string argument", error=True)
            try:
                result = await session.read_resource(uri)
            except MCPError as exc:
                return Observation(f"error: cannot read {uri}: {exc.message}", error=True,
                                   data={"code": exc.code, "uri": uri})
            return resource_observation(uri, result, self._media, self.spec.max_output_chars)
        try:
            result = await session.call_tool(self._to_mcp.get(call.name, call.name), dict(call.arguments))
        except MCPError as exc:
            return Observation(f"error: {exc.message}", error=True, data={"code": exc.code, "is_error": True})
        return tool_observation(result, self._media, self.spec.max_output_chars)

    async def close(self) -> None:
        session, self.session = self.session, None
        try:
            if session is not None:
                await session.close()
        finally:
            if self._tmp is not None:
                self._tmp.cleanup()
                self._tmp = None

    # --- for checkers ------------------------------------------------------------------------

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        """Call any tool (hidden ones too) on this episode's server; returns the SDK result."""
        return await self._require_session().call_tool(name, arguments or {})

    async def read_resource(self, uri: str) -> Any:
        return await self._require_session().read_resource(uri)

    # --- helpers -------------------------------------------------------------------------------

    def _require_session(self) -> McpSession:
        if self.session is None:
            raise McpServerError("the MCP environment is not connected (reset() was not called or failed)")
        return self.session

    @staticmethod
    def _resource_tool(name: str, info: ServerInfo) -> ToolSpec:
        known = [r.uri for r in info.resources][:20] + [t.uri_template for t in info.resource_templates][:10]
        hint = f" Known: {', '.join(str(k) for k in known)}." if known else ""
        return ToolSpec(
            name,
            f"Read an MCP resource of this server by URI.{hint}",
            {"type": "object", "properties": {"uri": {"type": "string", "description": "The resource URI"}},
             "required": ["uri"]},
        )

    def _intro(self, info: ServerInfo) -> str:
        lines = [f"Connected to MCP server {info.name or '?'}"
                 + (f" {info.version}" if info.version else "") + f" (protocol {info.protocol_version})."]
        if info.instructions:
            lines.append(info.instructions.strip())
        if info.resources or info.resource_templates:
            lines.append("Resources:")
            lines += [f"- {r.uri}" + (f": {r.description}" if r.description else "") for r in info.resources]
            lines += [f"- {t.uri_template}" + (f": {t.description}" if t.description else "")
                      for t in info.resource_templates]
        if info.prompts:
            lines.append("Prompts: " + ", ".join(
                f"{p.name}({', '.join(a.name for a in p.arguments or [])})" for p in info.prompts))
        return "\n".join(lines)


def make_environment(spec: McpSpec, base_dir: Path | None = None) -> McpEnvironment:
    return McpEnvironment(spec, base_dir=base_dir)

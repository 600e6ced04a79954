"""``type: mcp``: any MCP server as an agentsynth environment.

One environment instance serves one episode. ``reset`` copies the pack's world
directory (if any) to a fresh temporary directory, starts the server (stdio:
a subprocess; HTTP with ``command``: a subprocess listening on ``{port}``;
HTTP without ``command``: an already running server), connects with the
official ``mcp`` SDK, runs the ``setup`` calls, and discovers tools, resources
and prompts. ``step`` forwards one tool call. ``close`` stops the server and
deletes the copy. Checkers call a separate checker session (a fresh server on
the world by default, see :meth:`McpEnvironment.checker_session`), and the
world is measured after every step against its quota. A server that hangs or crashes fails the episode with a clear
error (:class:`~agentsynth_mcp.session.McpServerError`) after it was stopped.

Placeholders usable in ``command``, ``args``, ``env`` values, ``cwd``, ``url``
and ``headers`` values: ``{python}`` (this interpreter), ``{base_dir}`` (the
pack's directory), ``{world}`` (this episode's copy of ``world``), ``{workdir}``
(this episode's temporary directory), ``{port}`` (a free TCP port), ``{seed}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import shutil
import signal
import sqlite3
import sys
from pathlib import Path
from typing import Any

import attrs

from agentsynth_kernel import InvalidValue, Observation, ToolCall, ToolSpec

from .convert import MediaStore, agent_tool_names, resource_observation, tool_observation, tool_spec
from .launcher import launch_argv
from .session import TRANSPORTS, Endpoint, McpServerError, McpSession, ServerInfo, free_port, read_tail
from .world import make_workdir, redact, unredact, usage

PLACEHOLDERS = ("python", "base_dir", "world", "workdir", "port", "seed")
CHECKS_ON = ("auto", "fresh-server", "new-session", "agent-session")


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
    checks_on: str = "auto"
    check_timeout: float | None = None
    max_observation_bytes: int = 65536
    max_argument_bytes: int = 1_000_000
    max_argument_depth: int = 64
    max_world_bytes: int = 256 * 1024 * 1024
    max_world_files: int = 20000
    max_check_bytes: int = 16 * 1024 * 1024
    confine_writes: bool = True
    writable: Any = attrs.field(factory=list)

    def __attrs_post_init__(self) -> None:
        self.args = _str_list(self.args, "args")
        self.hide_tools = _str_list(self.hide_tools, "hide_tools")
        self.writable = _str_list(self.writable, "writable")
        self.env = _str_map(self.env, "env")
        self.headers = _str_map(self.headers, "headers")
        if not isinstance(self.setup, list):
            raise InvalidValue(f"setup: expected a list of {{tool: NAME, arguments: {{...}}}}, got {self.setup!r}")
        seen_tool = False
        for i, call in enumerate(self.setup):
            if isinstance(call, dict) and "command" in call:
                unknown = set(call) - {"command", "timeout"}
                if unknown:
                    raise InvalidValue(f"setup[{i}]: unknown key {sorted(unknown)[0]!r} (expected command, timeout)")
                command = call["command"]
                if isinstance(command, str):
                    command = [command]
                call["command"] = _str_list(command, f"setup[{i}].command")
                if not call["command"]:
                    raise InvalidValue(f"setup[{i}].command: expected a non-empty list [PROGRAM, ARG...]")
                timeout = call.setdefault("timeout", 60)
                if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
                    raise InvalidValue(f"setup[{i}].timeout: expected a positive number of seconds, got {timeout!r}")
                if seen_tool:
                    raise InvalidValue(f"setup[{i}]: commands run before the server starts, so they must come "
                                       "before every tool call in setup")
                continue
            if not isinstance(call, dict) or not isinstance(call.get("tool"), str):
                raise InvalidValue(f"setup[{i}]: expected {{tool: NAME, arguments: {{...}}}} or "
                                   f"{{command: [PROGRAM, ARG...], timeout: SECONDS}}, got {call!r}")
            unknown = set(call) - {"tool", "arguments"}
            if unknown:
                raise InvalidValue(f"setup[{i}]: unknown key {sorted(unknown)[0]!r} (expected tool, arguments)")
            if not isinstance(call.get("arguments", {}), dict):
                raise InvalidValue(f"setup[{i}].arguments: expected a mapping")
            seen_tool = True
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
        for key in ("connect_timeout", "call_timeout", "check_timeout"):
            value = getattr(self, key)
            if value is not None and not value > 0:
                raise InvalidValue(f"{key}: must be a positive number of seconds, got {value}")
        for key in ("max_observation_bytes", "max_argument_bytes", "max_argument_depth", "max_world_bytes",
                    "max_world_files", "max_check_bytes"):
            if not getattr(self, key) > 0:
                raise InvalidValue(f"{key}: must be positive, got {getattr(self, key)}")
        if self.checks_on not in CHECKS_ON:
            raise InvalidValue(f"checks_on: expected one of {', '.join(CHECKS_ON)}, got {self.checks_on!r}")
        if self.checks_on == "new-session" and self.resolved_transport == "stdio":
            raise InvalidValue("checks_on: new-session needs an HTTP server (a stdio server has one session); "
                               "use fresh-server or agent-session")

    @property
    def resolved_checks_on(self) -> str:
        if self.checks_on != "auto":
            return self.checks_on
        return "fresh-server" if self.resolved_transport == "stdio" else "new-session"

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
    """An MCP server as an agentsynth Environment (async methods, run on the engine's loop).

    Checkers do not use the agent's session: :meth:`call_tool` / :meth:`read_resource` go through
    a checker session (``checks_on``), and :meth:`world_for_checks` first stops the agent's server
    so that the world no longer changes while it is read.
    """

    def __init__(self, spec: McpSpec, base_dir: Path | None = None) -> None:
        self.spec = spec
        self.base_dir = Path(base_dir or ".").resolve()
        self.session: McpSession | None = None
        self.info: ServerInfo | None = None
        self.workdir: Path | None = None
        self.world_dir: Path | None = None
        self.resource_tool_name: str | None = None
        self.violation: str = ""  # set when the agent broke a limit of the world (checkers then fail)
        self.seeded_schemas: dict[str, dict[str, str]] = {}  # SQLite files of the seeded world: name -> type
        self._checker: McpSession | None = None
        self._checking = False
        self._endpoint: Endpoint | None = None
        self._paths: list[tuple[str, str]] = []
        self._tools: list[ToolSpec] = []
        self._to_mcp: dict[str, str] = {}  # agent-visible tool name -> MCP tool name
        self._media = MediaStore()

    # --- Environment protocol ----------------------------------------------------------------

    async def reset(self, seed: int) -> Observation:
        try:
            return await self._reset(seed)
        except McpServerError as exc:
            raise self._redacted_error(exc) from exc

    async def step(self, call: ToolCall) -> Observation:
        try:
            return await self._step(call)
        except McpServerError as exc:
            raise self._redacted_error(exc) from exc

    def _redacted_error(self, exc: McpServerError) -> McpServerError:
        """The error with the episode's paths as placeholders, so episode errors read the same every run."""
        text = redact(str(exc), self._paths)
        return exc if text == str(exc) else type(exc)(text)

    async def _reset(self, seed: int) -> Observation:
        await self.close()
        spec = self.spec
        self.violation, self._checking = "", False
        self.workdir = make_workdir()
        if spec.world is not None:
            source = self.base_dir / expand(spec.world, {"base_dir": str(self.base_dir)})
            if not source.is_dir():
                raise McpServerError(f"world: {source} is not a directory")
            self.world_dir = self.workdir / "world"
            shutil.copytree(source, self.world_dir, ignore=shutil.ignore_patterns("__pycache__"))
        tmp = self.workdir / "tmp"
        tmp.mkdir()
        world = self.world_dir or self.workdir
        self._paths = []
        for path, placeholder in ((world, "<world>"), (self.workdir, "<workdir>")):
            for variant in dict.fromkeys((str(path), os.path.realpath(path))):
                self._paths.append((variant, placeholder))
        values = {
            "python": sys.executable,
            "base_dir": str(self.base_dir),
            "world": str(world),
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
        writable = None
        if spec.confine_writes:
            writable = [str(self.workdir), "/dev/null", "/dev/tty", *(expand(w, values) for w in spec.writable)]
        env = {"TMPDIR": str(tmp), "TMP": str(tmp), "TEMP": str(tmp)}
        env.update({k: expand(v, values) for k, v in spec.env.items()})
        self._endpoint = endpoint = Endpoint(
            transport=spec.resolved_transport,
            command=expand(spec.command, values) if spec.command else None,
            args=[expand(a, values) for a in spec.args],
            env=env,
            cwd=cwd,
            url=expand(spec.url, values) if spec.url else None,
            headers={k: expand(v, values) for k, v in spec.headers.items()},
            inherit_env=spec.inherit_env,
            protocol=spec.protocol,
            max_file_bytes=spec.max_world_bytes,
            writable=writable,
        )
        if spec.media_dir:
            media = Path(expand(spec.media_dir, values))
            self._media = MediaStore(media if media.is_absolute() else self.base_dir / media)
        for i, step in enumerate(spec.setup):
            if "command" in step:
                await self._run_setup_command(i, [expand(a, values) for a in step["command"]], float(step["timeout"]),
                                              str(world))
        self.session = McpSession(endpoint, connect_timeout=spec.connect_timeout, call_timeout=spec.call_timeout,
                                  log_dir=self.workdir)
        self.info = info = await self.session.start()
        for i, call in enumerate(spec.setup):
            if "tool" not in call:
                continue
            result = await self.session.call_tool(call["tool"], dict(call.get("arguments") or {}))
            if result.is_error:
                obs = tool_observation(result, self._media, 500)
                raise McpServerError(f"setup[{i}]: tool {call['tool']!r} returned an error: {obs.content}")
        self._check_world("setup")
        if self.violation:
            raise McpServerError(f"setup: {self.violation}")
        self.seeded_schemas = sqlite_schemas(self.world_dir) if self.world_dir is not None else {}
        names = {t.name for t in info.tools}
        unknown = [n for n in spec.hide_tools if n not in names]
        if unknown:
            raise McpServerError(f"hide_tools: the server has no tool {unknown[0]!r} (tools: {', '.join(sorted(names))})")
        visible = [t for t in info.tools if t.name not in spec.hide_tools]
        exposed = agent_tool_names([t.name for t in visible])
        self._to_mcp = {agent: mcp_name for mcp_name, agent in exposed.items()}
        self._tools = [self._redacted_spec(tool_spec(t, exposed[t.name])) for t in visible]
        self.resource_tool_name = None
        if spec.resource_tool and (info.resources or info.resource_templates):
            name = "read_resource" if "read_resource" not in self._to_mcp else "mcp_read_resource"
            self.resource_tool_name = name
            self._tools.append(self._resource_tool(name, info))
        return self._bounded(Observation(self._intro(info), data=info.summary()))

    async def tools(self) -> list[ToolSpec]:
        return list(self._tools)

    async def _step(self, call: ToolCall) -> Observation:
        from mcp import MCPError

        if self._checking:
            raise McpServerError("the episode's checks have started: no more tool calls")
        session = self._require_session()
        if self.violation:
            return Observation(f"error: {self.violation}", error=True, done=True)
        arguments = unredact(dict(call.arguments), self._paths)
        problem = self._argument_problem(arguments)
        if problem:
            return self._bounded(Observation(f"error: {call.name}: {problem}", error=True))
        if call.name == self.resource_tool_name:
            uri = arguments.get("uri")
            if not isinstance(uri, str) or not uri:
                return Observation(f"error: {call.name} needs a 'uri' string argument", error=True)
            try:
                result = await session.read_resource(uri)
            except MCPError as exc:
                obs = Observation(f"error: cannot read {uri}: {exc.message}", error=True,
                                  data={"code": exc.code, "uri": uri})
            else:
                obs = resource_observation(uri, result, self._media, self.spec.max_output_chars)
        else:
            try:
                result = await session.call_tool(self._to_mcp.get(call.name, call.name), arguments)
            except MCPError as exc:
                obs = Observation(f"error: {exc.message}", error=True, data={"code": exc.code, "is_error": True})
            else:
                obs = tool_observation(result, self._media, self.spec.max_output_chars)
        self._check_world(f"after {call.name}")
        if self.violation:
            return self._bounded(Observation(f"{obs.content}\nerror: {self.violation}; the episode ends", error=True,
                                             done=True, data=obs.data))
        return self._bounded(obs)

    async def close(self) -> None:
        session, self.session = self.session, None
        checker, self._checker = self._checker, None
        try:
            for s in (checker, session):
                if s is not None:
                    await s.close()
        finally:
            if self.workdir is not None:  # the attribute stays: tests and reports may say where it was
                shutil.rmtree(self.workdir, ignore_errors=True)

    # --- for checkers ------------------------------------------------------------------------

    @property
    def check_timeout(self) -> float:
        return self.spec.check_timeout or self.spec.call_timeout

    async def world_for_checks(self) -> Path | None:
        """The world directory, once the agent can no longer change it: its server is stopped
        (unless ``checks_on: agent-session`` or the server is shared). No more steps after this."""
        self._checking = True
        mode = self.spec.resolved_checks_on
        if mode == "fresh-server" and self.session is not None:
            session, self.session = self.session, None
            await session.close()
        return self.world_dir

    async def checker_session(self) -> McpSession:
        """The session checkers call: a fresh server on the world (``fresh-server``), a new session
        to the same HTTP server (``new-session``), or the agent's (``agent-session``, opt-in)."""
        await self.world_for_checks()
        mode = self.spec.resolved_checks_on
        if mode == "agent-session":
            return self._require_session()
        if self._checker is None:
            if self._endpoint is None or self.workdir is None:
                raise McpServerError("the MCP environment is not connected (reset() was not called or failed)")
            checker = McpSession(self._endpoint, connect_timeout=self.spec.connect_timeout,
                                 call_timeout=self.check_timeout, log_dir=self.workdir,
                                 log_name="checker-stderr.log")
            try:
                await checker.start()
            except McpServerError as exc:  # it ran for the agent: the world the agent left keeps it down
                await checker.close()
                raise McpCheckFailed(redact(f"the checker's server did not start on the world the agent left: {exc}",
                                            self._paths)) from exc
            self._checker = checker
        return self._checker

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        """Call any tool (hidden ones too) on the checker session; returns the SDK result.
        A hang or crash raises :class:`McpCheckFailed`."""
        session = await self.checker_session()
        return await self._checked(session.call_tool(name, arguments or {}, timeout=self.check_timeout))

    async def read_resource(self, uri: str) -> Any:
        session = await self.checker_session()
        return await self._checked(session.read_resource(uri, timeout=self.check_timeout))

    async def _checked(self, request: Any) -> Any:
        try:
            return await request
        except McpServerError as exc:
            raise McpCheckFailed(redact(str(exc), self._paths)) from exc

    # --- limits --------------------------------------------------------------------------------

    def _check_world(self, when: str) -> None:
        if self.world_dir is None or self.violation:
            return
        size, count = usage(self.world_dir, self.spec.max_world_files)
        if size > self.spec.max_world_bytes:
            self.violation = (f"the world holds {size} bytes {when}, over its limit of {self.spec.max_world_bytes}"
                              " (max_world_bytes)")
        elif count > self.spec.max_world_files:
            self.violation = (f"the world holds more than {self.spec.max_world_files} files and directories {when}"
                              " (max_world_files)")

    def _argument_problem(self, arguments: dict[str, Any]) -> str:
        if too_deep(arguments, self.spec.max_argument_depth):
            return f"the arguments are nested more than {self.spec.max_argument_depth} levels deep (max_argument_depth)"
        try:
            size = len(json.dumps(arguments, ensure_ascii=False, default=str).encode("utf-8"))
        except UnicodeEncodeError:
            return "the arguments contain text that is not valid Unicode (a lone surrogate)"
        except (TypeError, ValueError, RecursionError) as exc:
            return f"the arguments cannot be sent as JSON: {exc}"
        if size > self.spec.max_argument_bytes:
            return f"the arguments take {size} bytes, over the limit of {self.spec.max_argument_bytes} (max_argument_bytes)"
        return ""

    def _bounded(self, obs: Observation) -> Observation:
        """The observation with episode paths redacted and its text and data under the byte cap."""
        cap = self.spec.max_observation_bytes
        content = redact(obs.content, self._paths)
        data = redact(obs.data, self._paths) if obs.data is not None else None
        encoded = content.encode("utf-8", errors="replace")
        if len(encoded) > cap:
            content = (encoded[:cap].decode("utf-8", errors="ignore")
                       + f"\n... [truncated: {len(encoded)} bytes, over the observation limit of {cap}]")
        if isinstance(data, dict):
            data = cap_data(data, cap)
        return Observation(content, error=obs.error, data=data, done=obs.done)

    async def _run_setup_command(self, index: int, argv: list[str], timeout: float, cwd: str) -> None:
        """One ``setup`` command, in the world directory before the server starts, under the same
        launcher (limits, confinement) as the server."""
        assert self._endpoint is not None and self.workdir is not None
        log = self.workdir / f"setup-{index}.log"
        label = f"setup[{index}]: command {' '.join(argv)!r}"
        with open(log, "wb") as out:
            try:
                proc = await asyncio.create_subprocess_exec(
                    *launch_argv(argv, max_file_bytes=self._endpoint.max_file_bytes, writable=self._endpoint.writable),
                    cwd=cwd, env=self._endpoint.process_env(), stdin=asyncio.subprocess.DEVNULL, stdout=out,
                    stderr=out, start_new_session=True)
            except OSError as exc:
                raise McpServerError(f"{label} cannot start: {exc}") from exc
            try:
                code = await asyncio.wait_for(proc.wait(), timeout)
            except (TimeoutError, asyncio.CancelledError) as exc:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
                if isinstance(exc, asyncio.CancelledError):
                    raise
                raise McpServerError(f"{label} did not finish within {timeout:g}s (setup timeout); it was killed"
                                     + _tail(log)) from None
        if code != 0:
            raise McpServerError(f"{label} exited with code {code}" + _tail(log))

    # --- helpers -------------------------------------------------------------------------------

    def _redacted_spec(self, spec: ToolSpec) -> ToolSpec:
        """Tool descriptions and schemas that mention the episode's paths show the placeholders."""
        return ToolSpec(spec.name, redact(spec.description, self._paths), redact(spec.parameters, self._paths),
                        read_only=spec.read_only)

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
            read_only=True,
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


class McpCheckFailed(McpServerError):
    """The server hung or crashed while a checker called it: the check fails (the world the agent
    left could not be verified), the run goes on."""


def _tail(log: Path) -> str:
    tail = read_tail(log)
    return ("\n  output (last lines):\n    " + tail.replace("\n", "\n    ")) if tail else ""


def too_deep(value: Any, limit: int) -> bool:
    """Whether ``value`` nests lists / dicts more than ``limit`` levels (iterative: no recursion)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list, tuple)):
            if depth >= limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return False


def cap_data(data: dict[str, Any], cap: int) -> dict[str, Any]:
    """Structured data under ``cap`` bytes of JSON: a part that is too big is replaced by its size
    and sha256, so no multi-MB value is kept whole in a trajectory."""
    out = dict(data)
    for key in list(out):
        try:
            raw = json.dumps(out[key], ensure_ascii=False, default=str).encode("utf-8", errors="replace")
        except (TypeError, ValueError, RecursionError):
            raw = repr(out[key]).encode("utf-8", errors="replace")
        if len(raw) > cap // 2:
            out[key] = {"truncated": True, "bytes": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}
    return out


def sqlite_schemas(world: Path, max_files: int = 50) -> dict[str, dict[str, str]]:
    """``{relative path: {object name: type}}`` of the SQLite files in the world (read-only)."""
    found: dict[str, dict[str, str]] = {}
    for path in sorted(world.rglob("*"))[:2000]:
        if len(found) >= max_files:
            break
        try:
            if path.is_symlink() or not path.is_file():
                continue
            with open(path, "rb") as fp:
                if fp.read(16) != b"SQLite format 3\x00":
                    continue
            conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=1)
            try:
                rows = conn.execute("SELECT name, type FROM sqlite_schema").fetchall()
            finally:
                conn.close()
        except (OSError, sqlite3.Error):
            continue
        found[str(path.relative_to(world))] = {name: kind for name, kind in rows}
    return found


def make_environment(spec: McpSpec, base_dir: Path | None = None) -> McpEnvironment:
    return McpEnvironment(spec, base_dir=base_dir)

"""``agentsynth mcp ...``: look at an MCP server while writing a pack."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import click


def _pairs(values: tuple[str, ...], what: str) -> dict[str, str]:
    out = {}
    for value in values:
        key, sep, val = value.partition("=" if what == "env" else ":")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected {'KEY=VALUE' if what == 'env' else 'NAME: VALUE'}, got {value!r}",
                                     param_hint=f"--{what}")
        out[key.strip()] = val.strip() if what == "header" else val
    return out


async def _inspect(endpoint: Any, timeout: float) -> dict[str, Any]:
    from .session import McpSession

    session = McpSession(endpoint, connect_timeout=timeout, call_timeout=timeout)
    try:
        info = await session.start()
    finally:
        await session.close()
    summary = info.summary()
    summary["tools"] = [
        {"name": t.name, "description": t.description or "", "input_schema": t.input_schema,
         **({"output_schema": t.output_schema} if t.output_schema else {})}
        for t in info.tools
    ]
    summary["instructions"] = info.instructions
    return summary


def _type_name(prop: Any) -> str:
    if not isinstance(prop, dict):
        return "any"
    if "enum" in prop:
        return "|".join(map(str, prop["enum"]))
    if "anyOf" in prop or "oneOf" in prop:
        names = [_type_name(alt) for alt in prop.get("anyOf", prop.get("oneOf", []))]
        names = [n for n in names if n != "null"] or ["null"]
        return "|".join(dict.fromkeys(names))
    kind = prop.get("type", "any")
    if isinstance(kind, list):
        return "|".join(str(k) for k in kind if k != "null") or "null"
    if kind == "array" and isinstance(prop.get("items"), dict):
        return f"list[{_type_name(prop['items'])}]"
    return str(kind)


def _signature(schema: dict[str, Any]) -> str:
    props = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    return ", ".join(f"{name}: {_type_name(prop)}" if name in required else f"{name}?: {_type_name(prop)}"
                     for name, prop in props.items())


def server_options(fn: Any) -> Any:
    """The options every `agentsynth mcp` subcommand uses to reach a server."""
    options = [
        click.argument("command", nargs=-1, type=click.UNPROCESSED),
        click.option("--url", help="Connect to a running HTTP server instead (streamable HTTP; SSE if it ends in /sse)."),
        click.option("--header", "headers", multiple=True, metavar="'NAME: VALUE'", help="HTTP header (repeatable)."),
        click.option("--env", "envs", multiple=True, metavar="KEY=VALUE", help="Environment variable for the server."),
        click.option("--cwd", type=click.Path(file_okay=False), help="Working directory of the server."),
        click.option("--transport", type=click.Choice(["auto", "stdio", "streamable-http", "sse"]), default="auto"),
        click.option("--timeout", type=float, default=20.0, show_default=True,
                     help="Connect (and call) timeout in seconds."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def make_endpoint(command: tuple[str, ...], url: str | None, headers: tuple[str, ...], envs: tuple[str, ...],
                  cwd: str | None, transport: str, example: str) -> Any:
    from .session import Endpoint

    if not command and not url:
        raise click.UsageError(f"give a server command after '--' (e.g. `{example}`) or --url")
    if transport == "auto":
        transport = "stdio" if not url else ("sse" if url.rstrip("/").endswith("/sse") else "streamable-http")
    return Endpoint(
        transport=transport, command=command[0] if command else None, args=list(command[1:]),
        env=_pairs(envs, "env"), cwd=cwd, url=url, headers=_pairs(headers, "header"),
    )


@click.group()
def mcp() -> None:
    """Work with MCP servers (agentsynth-mcp)."""


@mcp.command(context_settings={"ignore_unknown_options": True})
@server_options
@click.option("--all", "show_all", is_flag=True, help="Also list resources, resource templates and prompts.")
@click.option("--json", "as_json", is_flag=True, help="Everything as JSON (tool schemas included).")
def tools(command: tuple[str, ...], url: str | None, headers: tuple[str, ...], envs: tuple[str, ...],
          cwd: str | None, transport: str, timeout: float, show_all: bool, as_json: bool) -> None:
    """Print the tools of an MCP server: `agentsynth mcp tools -- COMMAND ARGS...` or `--url URL`."""
    from .session import McpServerError

    endpoint = make_endpoint(command, url, headers, envs, cwd, transport, "agentsynth mcp tools -- python server.py")
    try:
        summary = asyncio.run(_inspect(endpoint, timeout))
    except McpServerError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps(summary, indent=2, default=str))
        return
    server = summary["server"]
    click.echo(f"{server['name'] or '?'} {server['version']} (protocol {server['protocol_version']}):"
               f" {len(summary['tools'])} tools")
    for tool in summary["tools"]:
        click.echo(f"  {tool['name']}({_signature(tool['input_schema'] or {})})")
        if tool["description"]:
            first = tool["description"].strip().splitlines()[0]
            click.echo(f"      {first}")
    if show_all:
        click.echo(f"resources: {len(summary['resources'])}")
        for res in summary["resources"]:
            click.echo(f"  {res['uri']}" + (f"  {res['description']}" if res["description"] else ""))
        for tpl in summary["resource_templates"]:
            click.echo(f"  {tpl['uri_template']}" + (f"  {tpl['description']}" if tpl["description"] else ""))
        click.echo(f"prompts: {len(summary['prompts'])}")
        for prompt in summary["prompts"]:
            click.echo(f"  {prompt['name']}({', '.join(prompt['arguments'])})"
                       + (f"  {prompt['description']}" if prompt["description"] else ""))
    sys.stdout.flush()


async def _call(endpoint: Any, timeout: float, tool: str | None, arguments: dict[str, Any],
                resource: str | None) -> tuple[Any, Any]:
    from .convert import MediaStore, resource_observation, tool_observation
    from .session import McpSession

    session = McpSession(endpoint, connect_timeout=timeout, call_timeout=timeout)
    try:
        await session.start()
        if resource is not None:
            result = await session.read_resource(resource)
            return result, resource_observation(resource, result, MediaStore(), 0)
        result = await session.call_tool(tool or "", arguments)
        return result, tool_observation(result, MediaStore(), 0)
    finally:
        await session.close()


@mcp.command(context_settings={"ignore_unknown_options": True})
@click.option("--tool", "-t", "tool", metavar="NAME", help="The tool to call.")
@click.option("--arguments", "-a", "arguments", default="{}", metavar="JSON", help="Tool arguments as a JSON object.")
@click.option("--resource", "-r", metavar="URI", help="Read this resource instead of calling a tool.")
@server_options
@click.option("--json", "as_json", is_flag=True, help="Print the value a checker would compare (mcp_call), as JSON.")
def call(tool: str | None, arguments: str, resource: str | None, command: tuple[str, ...], url: str | None,
         headers: tuple[str, ...], envs: tuple[str, ...], cwd: str | None, transport: str, timeout: float,
         as_json: bool) -> None:
    """Call one tool (or read a resource) on a fresh server and print the result:
    `agentsynth mcp call -t add -a '{"a": 1, "b": 2}' -- COMMAND ARGS...`. Exit 1 on a tool error."""
    from mcp import MCPError

    from .convert import result_value
    from .session import McpServerError

    if (tool is None) == (resource is None):
        raise click.UsageError("give --tool NAME (with --arguments JSON) or --resource URI")
    try:
        args = json.loads(arguments)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--arguments") from None
    if not isinstance(args, dict):
        raise click.BadParameter("expected a JSON object", param_hint="--arguments")
    endpoint = make_endpoint(command, url, headers, envs, cwd, transport, "agentsynth mcp call -t NAME -- python server.py")
    try:
        result, obs = asyncio.run(_call(endpoint, timeout, tool, args, resource))
    except McpServerError as exc:
        raise click.ClickException(str(exc)) from None
    except MCPError as exc:
        raise click.ClickException(f"the server answered with an error: {exc.message}") from None
    click.echo(json.dumps(result_value(result), indent=2, default=str) if as_json else obs.content)
    if obs.error:
        sys.exit(1)

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


@click.group()
def mcp() -> None:
    """Work with MCP servers (agentsynth-mcp)."""


@mcp.command(context_settings={"ignore_unknown_options": True})
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.option("--url", help="Connect to a running HTTP server instead (streamable HTTP, or SSE if it ends in /sse).")
@click.option("--header", "headers", multiple=True, metavar="'NAME: VALUE'", help="HTTP header (repeatable).")
@click.option("--env", "envs", multiple=True, metavar="KEY=VALUE", help="Environment variable for the server.")
@click.option("--cwd", type=click.Path(file_okay=False), help="Working directory of the server.")
@click.option("--transport", type=click.Choice(["auto", "stdio", "streamable-http", "sse"]), default="auto")
@click.option("--timeout", type=float, default=20.0, show_default=True, help="Connect timeout in seconds.")
@click.option("--all", "show_all", is_flag=True, help="Also list resources, resource templates and prompts.")
@click.option("--json", "as_json", is_flag=True, help="Everything as JSON (tool schemas included).")
def tools(command: tuple[str, ...], url: str | None, headers: tuple[str, ...], envs: tuple[str, ...],
          cwd: str | None, transport: str, timeout: float, show_all: bool, as_json: bool) -> None:
    """Print the tools of an MCP server: `agentsynth mcp tools -- COMMAND ARGS...` or `--url URL`."""
    from .session import Endpoint, McpServerError

    if not command and not url:
        raise click.UsageError("give a server command after '--' (e.g. `agentsynth mcp tools -- python server.py`)"
                               " or --url")
    if transport == "auto":
        transport = "stdio" if not url else ("sse" if url.rstrip("/").endswith("/sse") else "streamable-http")
    endpoint = Endpoint(
        transport=transport, command=command[0] if command else None, args=list(command[1:]),
        env=_pairs(envs, "env"), cwd=cwd, url=url, headers=_pairs(headers, "header"),
    )
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

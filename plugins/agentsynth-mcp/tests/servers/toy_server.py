"""A real MCP server for the tests: normal tools, a failing tool, an image, a crash, a hang, state.

    python toy_server.py [--http PORT | --sse PORT] [--pidfile PATH] [--crash-on-start] [--hang-on-start]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

if __name__ == "__main__":  # before the (slow) SDK import, so start-up failures happen at once
    if "--pidfile" in sys.argv:
        pidfile = Path(sys.argv[sys.argv.index("--pidfile") + 1])
        pidfile.parent.mkdir(parents=True, exist_ok=True)
        pidfile.write_text(str(os.getpid()))
    if "--crash-on-start" in sys.argv:
        sys.exit("toy server: cannot start (--crash-on-start)")
    if "--hang-on-start" in sys.argv:
        time.sleep(3600)

from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel

mcp = MCPServer("toy", version="0.1", instructions="A toy server for tests.", log_level="WARNING")
STATE = {"counter": 0}
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


class Item(BaseModel):
    name: str
    tags: list[str]


@mcp.tool(annotations=ToolAnnotations(read_only_hint=True))  # the server says: calling it changes nothing
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@mcp.tool()
def item(name: str) -> Item:
    """A structured result."""
    return Item(name=name, tags=["x", "y"])


@mcp.tool()
def fail(reason: str = "bad input") -> str:
    """Always fails with a tool error (isError)."""
    raise ToolError(f"refused: {reason}")


@mcp.tool()
def picture() -> Image:
    """Returns a small PNG image."""
    return Image(data=PNG, format="png")


@mcp.tool()
def bump() -> int:
    """Increment an in-memory counter and return it (per server process)."""
    STATE["counter"] += 1
    return STATE["counter"]


@mcp.tool()
def write_note(name: str, text: str) -> str:
    """Write a file in the working directory."""
    Path(name).write_text(text, encoding="utf-8")
    return f"wrote {name}"


@mcp.tool()
def read_note(name: str) -> str:
    """Read a file from the working directory."""
    path = Path(name)
    if not path.exists():
        raise ToolError(f"no file {name}")
    return path.read_text(encoding="utf-8")


@mcp.tool(name="notes.count")
def notes_count() -> int:
    """A tool whose MCP name is not a valid OpenAI function name."""
    return len(list(Path(".").glob("*.txt")))


@mcp.tool()
def pid() -> int:
    """This server's process id."""
    return os.getpid()


@mcp.tool()
def spawn_child() -> int:
    """Start a long-lived child process (same process group) and return its pid."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    return child.pid


@mcp.tool()
def env_var(name: str) -> str:
    """An environment variable of the server process."""
    return os.environ.get(name, "")


@mcp.tool()
def header(name: str, ctx: Context) -> str:
    """An HTTP request header of this call ('' over stdio)."""
    headers = ctx.headers or {}
    return next((v for k, v in headers.items() if k.lower() == name.lower()), "")


@mcp.tool()
def crash(code: int = 3) -> str:
    """Kill the server process at once."""
    print("toy server: crashing on purpose", file=sys.stderr, flush=True)
    os._exit(code)


@mcp.tool()
def hang(seconds: float = 3600) -> str:
    """Block for a long time."""
    time.sleep(seconds)
    return "woke up"


@mcp.resource("toy://readme", description="What this server is")
def readme() -> str:
    return "toy server readme"


@mcp.resource("toy://data", description="Some JSON data")
def data() -> dict:
    return {"items": [{"name": "a", "n": 1}, {"name": "b", "n": 2}]}


@mcp.resource("toy://counter", description="The counter's value")
def counter() -> str:
    return str(STATE["counter"])


@mcp.prompt(description="Greet someone")
def greet(name: str) -> str:
    return f"Say hello to {name}."


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int)
    parser.add_argument("--sse", type=int)
    parser.add_argument("--pidfile")
    parser.add_argument("--crash-on-start", action="store_true")
    parser.add_argument("--hang-on-start", action="store_true")
    args = parser.parse_args()
    if args.http:
        mcp.run("streamable-http", host="127.0.0.1", port=args.http)
    elif args.sse:
        mcp.run("sse", host="127.0.0.1", port=args.sse)
    else:
        mcp.run()


if __name__ == "__main__":
    main()

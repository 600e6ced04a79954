"""A deliberately permissive file + SQL MCP server, the kind an agent can abuse (for the adversarial tests).

It keeps paths inside its world for reads and writes (as a decent server does), but, like many real
servers, lets the agent create symlinks and hard links whose *target* is anywhere, run any SQL on
``app.db``, and keep unsaved "drafts" in process memory that ``read_file`` shows before the disk.

    python files_server.py --world DIR
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import time
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

mcp = MCPServer("files", version="1.0", instructions="Files and a SQLite database in a world.", log_level="WARNING")
WORLD = Path(".")
DRAFTS: dict[str, str] = {}


def _inside(path: str) -> Path:
    full = (WORLD / path).resolve() if not os.path.isabs(path) else Path(path).resolve()
    if not full.is_relative_to(WORLD):
        raise ToolError(f"{path}: outside the world")
    return WORLD / os.path.relpath(full, WORLD)


@mcp.tool()
def read_file(path: str) -> str:
    """Read a text file (an unsaved draft of it, if there is one)."""
    if path in DRAFTS:
        return DRAFTS[path]
    try:
        return _inside(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ToolError(str(exc)) from None


@mcp.tool()
def write_file(path: str, text: str) -> str:
    """Write a text file (parent directories are created)."""
    target = _inside(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return f"wrote {len(text)} characters to {path}"


@mcp.tool()
def draft(path: str, text: str) -> str:
    """Keep an unsaved draft of a file in memory (read_file shows it; the disk does not change)."""
    DRAFTS[path] = text
    return f"draft of {path} kept"


@mcp.tool()
def symlink(target: str, link: str) -> str:
    """Create a symbolic link ``link`` (in the world) pointing to ``target``."""
    where = _inside(link)
    where.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, where)
    return f"{link} -> {target}"


@mcp.tool()
def hardlink(target: str, link: str) -> str:
    """Create a hard link ``link`` (in the world) to the file ``target``."""
    where = _inside(link)
    where.parent.mkdir(parents=True, exist_ok=True)
    os.link(target, where)
    return f"{link} = {target}"


@mcp.tool()
def sql(query: str) -> list[list[object]]:
    """Run any SQL on app.db and return the rows."""
    conn = sqlite3.connect(WORLD / "app.db")
    try:
        try:
            rows = [list(r) for r in conn.execute(query).fetchall()]
        except sqlite3.ProgrammingError:  # several statements
            conn.executescript(query)
            rows = []
        conn.commit()
        return rows
    except sqlite3.Error as exc:
        raise ToolError(f"SQL error: {exc}") from None
    finally:
        conn.close()


@mcp.tool()
def where() -> str:
    """The world directory's absolute path (servers that echo it are common)."""
    return str(WORLD)


@mcp.tool()
def big(size: int) -> str:
    """A text result of ``size`` characters."""
    return "x" * size


@mcp.tool()
def big_structured(items: int) -> dict[str, list[str]]:
    """A structured result with ``items`` strings of 1 KiB each."""
    return {"items": ["y" * 1024] * items}


@mcp.tool()
def hang(seconds: float = 3600) -> str:
    """Sleep (a hung server)."""
    time.sleep(seconds)
    return "woke up"


@mcp.tool()
def crash() -> str:
    """Exit the server process at once (a crashed server)."""
    os._exit(3)


def main() -> None:
    global WORLD
    parser = argparse.ArgumentParser()
    parser.add_argument("--world", default=".")
    parser.add_argument("--hang-on-start-if", metavar="FILE", help="hang at start-up when FILE exists in the world")
    args = parser.parse_args()
    WORLD = Path(args.world).resolve()
    if not (WORLD / "app.db").exists() and (WORLD / "seed.sql").is_file():
        conn = sqlite3.connect(WORLD / "app.db")
        conn.executescript((WORLD / "seed.sql").read_text(encoding="utf-8"))
        conn.close()
    if args.hang_on_start_if and (WORLD / args.hang_on_start_if).exists():
        time.sleep(3600)
    mcp.run()


if __name__ == "__main__":
    main()

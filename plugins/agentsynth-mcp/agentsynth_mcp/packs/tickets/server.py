"""A small stateful ticketing service as an MCP server (the SDK's MCPServer, formerly FastMCP).

State lives in ``<world>/tickets.db`` (SQLite), created from ``<world>/seed.sql``
on first start; reports are written under ``<world>/reports/``. Each agentsynth
episode runs this server on its own copy of the world directory.

Run by hand::

    python server.py --world /tmp/world                       # stdio
    python server.py --world /tmp/world --http 8000           # streamable HTTP on 127.0.0.1:8000/mcp
"""

from __future__ import annotations

import argparse
import csv
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError

Status = Literal["open", "in_progress", "closed"]
Priority = Literal["low", "medium", "high", "urgent"]

WORLD = Path(".")

mcp = MCPServer(
    "tickets",
    version="1.0",
    instructions="A ticketing service. Tickets have an id, title, description, status (open, in_progress, closed),"
    " priority (low, medium, high, urgent), an optional assignee, comments and labels.",
    log_level="WARNING",
)


@contextmanager
def db() -> Iterator[sqlite3.Connection]:
    """One connection per call: committed on success, rolled back on error, always closed."""
    path = WORLD / "tickets.db"
    fresh = not path.exists()
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA foreign_keys = ON")
    try:
        if fresh:
            conn.executescript((WORLD / "seed.sql").read_text(encoding="utf-8"))
        yield conn
        conn.commit()
    except BaseException:
        conn.rollback()
        raise
    finally:
        conn.close()


def _ticket(conn: sqlite3.Connection, ticket_id: int) -> dict[str, Any]:
    row = conn.execute("SELECT * FROM tickets WHERE id = ?", (ticket_id,)).fetchone()
    if row is None:
        raise ToolError(f"no ticket #{ticket_id}")
    ticket = dict(row)
    ticket["labels"] = [r[0] for r in conn.execute(
        "SELECT label FROM labels WHERE ticket_id = ? ORDER BY label", (ticket_id,))]
    ticket["comments"] = [dict(r) for r in conn.execute(
        "SELECT author, body FROM comments WHERE ticket_id = ? ORDER BY id", (ticket_id,))]
    return ticket


def _user(conn: sqlite3.Connection, name: str) -> str:
    if conn.execute("SELECT 1 FROM users WHERE name = ?", (name,)).fetchone() is None:
        users = ", ".join(r[0] for r in conn.execute("SELECT name FROM users ORDER BY name"))
        raise ToolError(f"no user {name!r} (users: {users})")
    return name


def _summary_rows(rows: list[sqlite3.Row]) -> list[dict[str, Any]]:
    return [{k: r[k] for k in ("id", "title", "status", "priority", "assignee")} for r in rows]


@mcp.tool()
def list_tickets(status: Status | None = None, assignee: str | None = None,
                 priority: Priority | None = None) -> list[dict[str, Any]]:
    """List tickets (id, title, status, priority, assignee), optionally filtered."""
    query, params = "SELECT * FROM tickets WHERE 1=1", []
    for column, value in (("status", status), ("assignee", assignee), ("priority", priority)):
        if value is not None:
            query += f" AND {column} = ?"
            params.append(value)
    with db() as conn:
        return _summary_rows(conn.execute(query + " ORDER BY id", params).fetchall())


@mcp.tool()
def search_tickets(query: str) -> list[dict[str, Any]]:
    """Find tickets whose title or description contains the query (case-insensitive)."""
    like = f"%{query.lower()}%"
    with db() as conn:
        rows = conn.execute(
            "SELECT * FROM tickets WHERE lower(title) LIKE ? OR lower(description) LIKE ? ORDER BY id", (like, like)
        ).fetchall()
        return _summary_rows(rows)


@mcp.tool()
def get_ticket(ticket_id: int) -> dict[str, Any]:
    """One ticket with its description, resolution, labels and comments."""
    with db() as conn:
        return _ticket(conn, ticket_id)


@mcp.tool()
def create_ticket(title: str, description: str = "", priority: Priority = "medium",
                  assignee: str | None = None) -> dict[str, Any]:
    """Open a new ticket; returns it (with its id)."""
    if not title.strip():
        raise ToolError("title must not be empty")
    with db() as conn:
        if assignee is not None:
            _user(conn, assignee)
        cur = conn.execute(
            "INSERT INTO tickets (title, description, status, priority, assignee) VALUES (?, ?, 'open', ?, ?)",
            (title.strip(), description, priority, assignee),
        )
        return _ticket(conn, int(cur.lastrowid or 0))


@mcp.tool()
def update_ticket(ticket_id: int, status: Status | None = None, priority: Priority | None = None,
                  assignee: str | None = None) -> dict[str, Any]:
    """Change a ticket's status, priority and/or assignee. Use close_ticket to close (it needs a resolution).
    Setting status to open or in_progress on a closed ticket reopens it (the resolution is cleared)."""
    with db() as conn:
        ticket = _ticket(conn, ticket_id)
        if status == "closed":
            raise ToolError("use close_ticket to close a ticket (a resolution is required)")
        if status is None and priority is None and assignee is None:
            raise ToolError("nothing to change: give status, priority or assignee")
        if assignee is not None:
            _user(conn, assignee)
        if status is not None:
            conn.execute("UPDATE tickets SET status = ?, resolution = NULL WHERE id = ?", (status, ticket_id))
        if priority is not None:
            conn.execute("UPDATE tickets SET priority = ? WHERE id = ?", (priority, ticket_id))
        if assignee is not None:
            conn.execute("UPDATE tickets SET assignee = ? WHERE id = ?", (assignee, ticket_id))
        del ticket
        return _ticket(conn, ticket_id)


@mcp.tool()
def close_ticket(ticket_id: int, resolution: Literal["fixed", "duplicate", "wontfix", "invalid"]) -> dict[str, Any]:
    """Close a ticket with a resolution."""
    with db() as conn:
        ticket = _ticket(conn, ticket_id)
        if ticket["status"] == "closed":
            raise ToolError(f"ticket #{ticket_id} is already closed (resolution: {ticket['resolution']})")
        conn.execute("UPDATE tickets SET status = 'closed', resolution = ? WHERE id = ?", (resolution, ticket_id))
        return _ticket(conn, ticket_id)


@mcp.tool()
def add_comment(ticket_id: int, body: str, author: str = "agent") -> dict[str, Any]:
    """Add a comment to a ticket."""
    if not body.strip():
        raise ToolError("a comment needs a body")
    with db() as conn:
        _ticket(conn, ticket_id)
        conn.execute("INSERT INTO comments (ticket_id, author, body) VALUES (?, ?, ?)", (ticket_id, author, body))
        return _ticket(conn, ticket_id)


@mcp.tool()
def add_label(ticket_id: int, label: str) -> dict[str, Any]:
    """Attach a label (e.g. 'security') to a ticket; adding an existing label is a no-op."""
    label = label.strip().lower()
    if not label:
        raise ToolError("label must not be empty")
    with db() as conn:
        _ticket(conn, ticket_id)
        conn.execute("INSERT OR IGNORE INTO labels (ticket_id, label) VALUES (?, ?)", (ticket_id, label))
        return _ticket(conn, ticket_id)


@mcp.tool()
def list_users() -> list[dict[str, Any]]:
    """The people tickets can be assigned to, with their team."""
    with db() as conn:
        return [dict(r) for r in conn.execute("SELECT name, team FROM users ORDER BY name")]


@mcp.tool()
def export_report(filename: str, status: Status | None = None, assignee: str | None = None) -> str:
    """Write a CSV report (id,title,status,priority,assignee) of the matching tickets to reports/<filename>."""
    name = Path(filename).name
    if not name.endswith(".csv") or name != filename.removeprefix("reports/"):
        raise ToolError("filename must be a plain file name ending in .csv, e.g. 'open.csv'")
    rows = list_tickets(status=status, assignee=assignee)
    out = WORLD / "reports" / name
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="", encoding="utf-8") as fp:
        writer = csv.DictWriter(fp, fieldnames=["id", "title", "status", "priority", "assignee"])
        writer.writeheader()
        writer.writerows(rows)
    return f"wrote {len(rows)} tickets to reports/{name}"


@mcp.resource("tickets://summary", description="Number of tickets per status")
def summary() -> str:
    with db() as conn:
        rows = conn.execute("SELECT status, count(*) FROM tickets GROUP BY status ORDER BY status").fetchall()
    return "\n".join(f"{status}: {count}" for status, count in rows)


@mcp.resource("team://oncall", description="Who is on call this week")
def oncall() -> str:
    with db() as conn:
        row = conn.execute("SELECT name FROM users WHERE oncall = 1").fetchone()
    return f"This week's on-call engineer: {row[0]}"


@mcp.resource("tickets://ticket/{ticket_id}", description="One ticket as JSON")
def ticket_resource(ticket_id: str) -> dict[str, Any]:
    try:
        with db() as conn:
            return _ticket(conn, int(ticket_id))
    except (ToolError, ValueError):
        raise ResourceNotFoundError(f"no ticket {ticket_id}") from None


@mcp.prompt(description="Ask an assistant to triage one ticket")
def triage(ticket_id: str) -> str:
    return f"Read ticket #{ticket_id}, set a sensible priority, and assign it to the right team member."


def main(argv: list[str] | None = None) -> None:
    global WORLD
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", default=".", help="directory with seed.sql (tickets.db is created there)")
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT/mcp")
    args = parser.parse_args(argv)
    WORLD = Path(args.world).resolve()
    if not (WORLD / "seed.sql").is_file() and not (WORLD / "tickets.db").is_file():
        sys.exit(f"tickets server: {WORLD} has no seed.sql")
    with db():
        pass
    if args.http:
        mcp.run("streamable-http", host="127.0.0.1", port=args.http)
    else:
        mcp.run()


if __name__ == "__main__":
    main()

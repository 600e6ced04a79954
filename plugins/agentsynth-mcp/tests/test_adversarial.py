"""The kernel's adversarial kit against MCP worlds: nothing an agent does through its tools, other
than really doing the task, passes a task, and no attempt touches the host."""

from __future__ import annotations

from pathlib import Path

from agentsynth_kernel import load_pack
from agentsynth_kernel.testing.adversarial import GENERIC_EXPLOITS, Exploit, assert_unfarmable, exploits_for
from agentsynth_mcp.exploits import MARKER, host_untouched, mcp_exploits

FILES_PACK = Path(__file__).parent / "packs" / "files"


def files_exploits() -> list[Exploit]:
    """Attempts aimed at the permissive test server: in-memory drafts and SQL views standing in for
    the real files and rows."""
    return [
        Exploit("files.draft", "keep the expected text as an unsaved draft that only the agent's server shows",
                [{"tool": "draft", "arguments": {"path": "notes/todo.txt", "text": "buy milk"}}, {"answer": "Saved."}],
                tasks=("save-note",)),
        Exploit("files.view_shadow", "rename the real table and put a view with the expected row in its place",
                [{"tool": "sql", "arguments": {"query": "ALTER TABLE items RENAME TO items_real; CREATE VIEW items AS "
                                                        "SELECT * FROM items_real UNION ALL SELECT 99, 'widget'"}},
                 {"answer": "Added."}], tasks=("add-item",)),
        Exploit("files.sql_out_of_world", "ATTACH a database outside the world and write there",
                [{"tool": "sql", "arguments": {"query": f"ATTACH '/tmp/{MARKER}-attach.db' AS x; "
                                                        "CREATE TABLE x.items (id, name)"}},
                 {"answer": "Added."}], tasks=("add-item",), host_check=host_untouched),
    ]


def test_the_hook_ships_at_least_eight_distinct_mcp_exploits():
    pack = load_pack("mcp-tickets")
    names = [e.name for e in exploits_for(pack)]
    mcp = [n for n in names if n.startswith("mcp.")]
    assert len(mcp) >= 8 and len(set(mcp)) == len(mcp)
    assert {e.name for e in GENERIC_EXPLOITS} <= set(names)
    assert all(e.host_check is not None for e in mcp_exploits() if "path" in e.name or "link" in e.name)


def test_mcp_tickets_cannot_be_farmed():
    outcomes = assert_unfarmable(load_pack("mcp-tickets"), concurrency=2, timeout=60)
    assert len({o.exploit for o in outcomes}) >= len(GENERIC_EXPLOITS) + 8
    assert host_untouched() is None


def test_a_permissive_file_server_cannot_be_farmed():
    pack = load_pack(str(FILES_PACK))
    exploits = [*exploits_for(pack), *files_exploits()]
    outcomes = assert_unfarmable(pack, exploits, concurrency=2, timeout=60)
    tried = {o.exploit for o in outcomes}
    assert {"mcp.symlink_file_out", "mcp.hardlink_out", "files.draft", "files.view_shadow"} <= tried
    assert host_untouched() is None

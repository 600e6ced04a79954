"""Reference solutions for the mcp-tickets pack (the ids come from world/seed.sql)."""


def call(tool, **arguments):
    return {"tool": tool, "arguments": arguments}


ORACLE = {
    "create-printer-ticket": [
        call("create_ticket", title="Printer on floor 3 jams", priority="high"),
        {"answer": "Opened the ticket."},
    ],
    "close-vpn": [
        call("search_tickets", query="VPN"),
        call("close_ticket", ticket_id=2, resolution="fixed"),
        {"answer": "Closed ticket #2 as fixed."},
    ],
    "assign-unassigned-high": [
        call("list_tickets", status="open", priority="high"),
        call("update_ticket", ticket_id=3, assignee="alice"),
        call("update_ticket", ticket_id=9, assignee="alice"),
        {"answer": "Assigned #3 and #9 to alice."},
    ],
    "comment-backup": [
        call("search_tickets", query="backup"),
        call("add_comment", ticket_id=4, body="The backup job was rescheduled to 02:00."),
        {"answer": "Comment added to #4."},
    ],
    "escalate-checkout": [
        call("search_tickets", query="checkout"),
        call("update_ticket", ticket_id=6, priority="urgent", status="in_progress"),
        {"answer": "Ticket #6 is now urgent and in progress."},
    ],
    "export-bob": [
        call("export_report", filename="bob_open.csv", status="open", assignee="bob"),
        {"answer": "Wrote reports/bob_open.csv."},
    ],
    "close-duplicate": [
        call("close_ticket", ticket_id=8, resolution="duplicate"),
        call("add_comment", ticket_id=4, body="Ticket #8 was closed as a duplicate of this one."),
        {"answer": "Closed #8 as a duplicate of #4."},
    ],
    "reopen-oncall": [
        call("read_resource", uri="team://oncall"),
        call("update_ticket", ticket_id=5, status="open", assignee="dave"),
        {"answer": "Reopened #5 and assigned it to dave."},
    ],
    "label-password": [
        call("search_tickets", query="password"),
        call("add_label", ticket_id=3, label="security"),
        call("add_label", ticket_id=9, label="security"),
        {"answer": "Labelled #3 and #9."},
    ],
    "carol-leave": [
        call("list_tickets", assignee="carol"),
        call("update_ticket", ticket_id=4, assignee="bob"),
        call("update_ticket", ticket_id=10, assignee="bob"),
        {"answer": "Moved #4 and #10 to bob."},
    ],
}

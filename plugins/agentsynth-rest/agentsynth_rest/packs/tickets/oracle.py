"""Scripted solutions for the tickets pack: the calls a careful helpdesk agent makes, task by task
(look things up first, then change exactly what the task asks)."""


def call(tool, **arguments):
    return {"tool": tool, "arguments": arguments}


ORACLE = {
    "close-duplicate": [
        call("listTickets", q="VPN drops every hour"),
        call("updateTicket", ticket_id=4, status="closed"),
        call("addComment", ticket_id=4, author="helpdesk", body="Duplicate of #1"),
        {"answer": "Closed ticket #4 as a duplicate of #1."},
    ],
    "escalate-printers": [
        call("listTickets", q="printer", status="open"),
        call("updateTicket", ticket_id=2, priority="high"),
        call("updateTicket", ticket_id=6, priority="high"),
        {"answer": "Tickets #2 and #6 are now high priority."},
    ],
    "assign-db-lead": [
        call("listTickets", q="Database backup failed"),
        call("listUsers", team="database", role="lead"),
        call("updateTicket", ticket_id=3, assignee_id=3, status="open"),
        {"answer": "Ticket #3 is open and assigned to Carol Diaz."},
    ],
    "file-outage": [
        call("listUsers", team="network"),
        call("createTicket", title="Core switch down in building A", requester="ops@corp.example", team="network",
             priority="urgent", description="The core switch in building A is down."),
        call("addTag", ticket_id=21, tag="outage"),
        call("updateTicket", ticket_id=21, assignee_id=2),
        {"answer": "Filed ticket #21, tagged outage and assigned to Bob Okafor (on call)."},
    ],
    "reopen-password": [
        call("listTickets", q="password reset loop"),
        call("updateTicket", ticket_id=5, status="open"),
        call("addComment", ticket_id=5, author="helpdesk", body="Reported again by leo@corp.example"),
        {"answer": "Reopened ticket #5 with a comment."},
    ],
    "retag-bug": [
        call("listTickets", tag="bug"),
        *[step for tid in (3, 7, 15, 16) for step in (call("addTag", ticket_id=tid, tag="defect"),
                                                      call("removeTag", ticket_id=tid, tag="bug"))],
        {"answer": "Tickets #3, #7, #15 and #16 carry 'defect' instead of 'bug'."},
    ],
    "reassign-departed": [
        call("listUsers", team="network"),
        call("listTickets", assignee_id=8),
        call("updateTicket", ticket_id=8, assignee_id=1),
        call("updateTicket", ticket_id=9, assignee_id=1),
        call("updateTicket", ticket_id=10, assignee_id=1),
        {"answer": "Mallory's open and pending tickets (#8, #9, #10) now belong to Alice Chen."},
    ],
    "delete-spam": [
        call("listTickets", requester="spam@promo.example"),
        call("deleteTicket", ticket_id=13),
        call("deleteTicket", ticket_id=14),
        call("deleteTicket", ticket_id=18),
        {"answer": "Deleted tickets #13, #14 and #18 from spam@promo.example."},
    ],
}

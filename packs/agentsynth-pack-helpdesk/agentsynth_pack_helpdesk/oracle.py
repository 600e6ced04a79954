"""The scripted solution of every task (``pack validate`` checks it passes them all)."""

ORACLE = {
    "assign-login-ticket": [{"tool": "sql_execute", "arguments": {"sql": "UPDATE tickets SET agent_id = 3 WHERE id = 102"}},
                            {"answer": "Ticket 102 is assigned to Cy."}],
    "close-crash-ticket": [{"tool": "sql_execute", "arguments": {"sql": "UPDATE tickets SET status = 'closed' WHERE id = 104"}},
                           {"answer": "Closed ticket 104."}],
    "raise-export-priority": [
        {"tool": "sql_execute", "arguments": {"sql": "UPDATE tickets SET priority = 'high' WHERE id = 106"}},
        {"answer": "Ticket 106 is now high priority."},
    ],
    "unassigned-to-bo": [
        {"tool": "sql_execute",
         "arguments": {"sql": "UPDATE tickets SET agent_id = 2 WHERE status = 'open' AND agent_id IS NULL"}},
        {"answer": "Tickets 102 and 106 are now Bo's."},
    ],
    "count-open-high": [{"tool": "sql_query", "arguments": {"sql": "SELECT count(*) FROM tickets WHERE status = 'open' "
                                                                   "AND priority = 'high'"}},
                        {"answer": "2"}],
}

"""Reference solution for support.yaml, in agentsynth-ai's oracle form: solve(observation, gym)
returns one action per step. (A reconstruction for these tests; see support.yaml.)"""

_SQL = {
    "close-ticket": ["UPDATE tickets SET status='closed' WHERE id=3"],
    "reassign-bo": ["UPDATE tickets SET owner='ana' WHERE owner='bo' AND status='open'"],
    "count-open-tickets": ["SELECT COUNT(*) FROM tickets WHERE status='open'"],
    "escalate-refund": ["SELECT * FROM orders WHERE id=12",
                        "INSERT INTO refunds (order_id, amount, reason) VALUES (12, 19.5, 'duplicate charge')"],
    "best-region": ["SELECT region, SUM(revenue) AS total FROM sales GROUP BY region ORDER BY total DESC LIMIT 1"],
    "audit-log-readonly": ["SELECT id FROM tickets WHERE owner='cy'"],
}

_ANSWER = {
    "close-ticket": "Ticket 3 is closed; ticket 4 is still open.",
    "reassign-bo": "Tickets 3 and 5 now belong to ana.",
    "count-open-tickets": "2 tickets are still open.",
    "escalate-refund": "Refunded 19.5 on order 12 (duplicate charge).",
    "best-region": "APAC had the highest revenue.",
    "audit-log-readonly": "cy owns ticket 6.",
}


def solve(observation, gym):
    sid = gym.scenario.id if gym.scenario is not None else ""
    steps = _SQL.get(sid, [])
    if gym.step_count < len(steps):
        return {"tool_name": "sql_query", "arguments": {"query": steps[gym.step_count]}}
    return {"answer": _ANSWER.get(sid, "Done.")}

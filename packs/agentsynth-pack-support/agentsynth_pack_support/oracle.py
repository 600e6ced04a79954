"""The scripted support agent of every task (``pack validate`` checks it passes them all).

Its messages (answers) go to the simulated user and the episode goes on with the user's reply,
so each script alternates: ask, look up, confirm, act, close.
"""


def _q(sql: str) -> dict:
    return {"tool": "sql_query", "arguments": {"sql": sql}}


def _x(sql: str) -> dict:
    return {"tool": "sql_execute", "arguments": {"sql": sql}}


ORACLE = {
    "refund-broken-kettle": [
        {"answer": "I'm sorry about the kettle. What is your order number?"},
        _q("SELECT id, item, total, status, days_since_delivery FROM orders WHERE id = 1042"),
        {"answer": "Order 1042, the electric kettle ($39.99), was delivered 4 days ago, so it qualifies. "
                   "Shall I refund $39.99? Please confirm."},
        _x("INSERT INTO refunds (order_id, amount) VALUES (1042, 39.99)"),
        _x("UPDATE orders SET status = 'refunded' WHERE id = 1042"),
        {"answer": "Done: $39.99 is refunded for order 1042."},
    ],
    "refuse-late-refund": [
        {"answer": "I can look into that. What is the order number?"},
        _q("SELECT id, status, days_since_delivery FROM orders WHERE id = 1077"),
        {"answer": "Order 1077 was delivered 90 days ago; refunds are only possible within 30 days of "
                   "delivery, so I can't refund it."},
        {"answer": "I'm sorry, I checked again: it is outside the 30-day window, so it is not eligible."},
    ],
    "change-address": [
        {"answer": "Happy to help. What is the email address on your account?"},
        _q("SELECT o.id, o.item, o.status, o.address FROM orders o JOIN customers c ON c.id = o.customer_id "
           "WHERE c.email = 'sam@example.com' AND o.item = 'Blue backpack'"),
        {"answer": "I found your backpack order 1051; it is still pending. What is the new address?"},
        {"answer": "I will change the shipping address of order 1051 to 12 Elm St. Is that correct?"},
        _x("UPDATE orders SET address = '12 Elm St' WHERE id = 1051"),
        {"answer": "Done: order 1051 will go to 12 Elm St."},
    ],
    "cancel-shipped-refused": [
        {"answer": "Sure, let me check. What is the email on your account?"},
        _q("SELECT o.id, o.status FROM orders o JOIN customers c ON c.id = o.customer_id "
           "WHERE c.email = 'sam@example.com' AND o.item = 'Water bottle'"),
        {"answer": "Your water bottle order 1052 has already shipped, so it can't be cancelled; only "
                   "pending orders can be. Once it arrives you can ask for a refund within 30 days."},
        {"answer": "Thank you for understanding."},
    ],
}

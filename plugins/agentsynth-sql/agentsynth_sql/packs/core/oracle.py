"""Scripted solutions for the `core` pack: what a careful operator would run, task by task."""


def q(sql):
    return {"tool": "sql_query", "arguments": {"sql": sql}}


def x(sql):
    return {"tool": "sql_execute", "arguments": {"sql": sql}}


def answer(text):
    return {"answer": text}


ORACLE = {
    # tier 1: lookups
    "lookup-customer-email": [
        q("SELECT email FROM customers WHERE name = 'Dana Whitfield'"),
        answer("Dana Whitfield's email address is dana.whitfield@example.com."),
    ],
    "count-pending-orders": [
        q("SELECT count(*) FROM orders WHERE status = 'pending'"),
        answer("There are 4 pending orders."),
    ],
    "lowest-stock-east": [
        q("SELECT sku, qty FROM inventory WHERE warehouse = 'east' ORDER BY qty LIMIT 1"),
        answer("HAT-01 (Wool Hat) has the fewest units in the east warehouse: none."),
    ],
    "order-total": [
        q("SELECT sum(qty * unit_price_cents) FROM order_items WHERE order_id = 1008"),
        answer("Order 1008 totals $56.99."),
    ],
    # tier 2: single-row updates
    "update-email": [
        q("SELECT id FROM customers WHERE name = 'Maya Chen'"),
        x("UPDATE customers SET email = 'maya@chen.example.org' WHERE id = 6"),
        answer("Updated Maya Chen's email to maya@chen.example.org."),
    ],
    "set-price": [
        x("UPDATE products SET price_cents = 2600 WHERE name = 'Travel Mug'"),
        answer("The Travel Mug now costs $26.00."),
    ],
    "mark-shipped": [
        q("SELECT status FROM orders WHERE id = 1005"),
        x("UPDATE orders SET status = 'shipped' WHERE id = 1005 AND status = 'paid'"),
        answer("Order 1005 is marked as shipped."),
    ],
    "deactivate-customer": [
        x("UPDATE customers SET active = 0 WHERE name = 'Omar Haddad'"),
        answer("Omar Haddad's account is deactivated."),
    ],
    "delete-customer-with-orders": [
        q("SELECT count(*) FROM orders WHERE customer_id = 2"),
        x("UPDATE customers SET active = 0 WHERE id = 2"),
        answer("Grace Hopper has orders on file, so her account cannot be deleted; I deactivated it instead."),
    ],
    # tier 3: multi-row updates
    "kitchen-discount": [
        x("UPDATE products SET price_cents = CAST(ROUND(price_cents * 0.9) AS INTEGER) WHERE category = 'kitchen'"),
        answer("All kitchen products are 10% cheaper now."),
    ],
    "restock-low": [
        x("UPDATE inventory SET qty = 20 WHERE qty < 5"),
        answer("Topped up 7 inventory lines to 20 units."),
    ],
    "ship-december-backlog": [
        x("UPDATE orders SET status = 'shipped' WHERE status = 'paid' AND placed_at LIKE '2025-12-%'"),
        answer("Orders 1003, 1004 and 1005 are marked as shipped."),
    ],
    "gold-tier": [
        x("UPDATE customers SET tier = 'gold' WHERE active = 1 AND id IN ("
          "SELECT o.customer_id FROM orders o JOIN payments p ON p.order_id = o.id "
          "WHERE p.status = 'captured' GROUP BY o.customer_id HAVING sum(p.amount_cents) >= 10000)"),
        answer("Customers 1 and 3 are in the gold tier."),
    ],
    # tier 4: multi-table consistency
    "refund-and-restock": [
        q("SELECT status, warehouse FROM orders WHERE id = 1004"),
        q("SELECT amount_cents FROM payments WHERE order_id = 1004 AND status = 'captured'"),
        x("BEGIN; "
          "UPDATE orders SET status = 'refunded' WHERE id = 1004; "
          "UPDATE payments SET status = 'refunded' WHERE order_id = 1004; "
          "INSERT INTO refunds (order_id, amount_cents, reason) VALUES (1004, 7798, 'returned'); "
          "UPDATE inventory SET qty = qty + (SELECT qty FROM order_items i WHERE i.order_id = 1004 AND i.sku = inventory.sku) "
          "WHERE warehouse = 'west' AND sku IN (SELECT sku FROM order_items WHERE order_id = 1004); "
          "COMMIT"),
        answer("Order 1004 is refunded ($77.98) and its items are back in stock in the west warehouse."),
    ],
    "cancel-and-void": [
        q("SELECT status, warehouse FROM orders WHERE id = 1006"),
        x("BEGIN; "
          "UPDATE orders SET status = 'cancelled' WHERE id = 1006; "
          "UPDATE invoices SET status = 'void' WHERE order_id = 1006; "
          "UPDATE inventory SET qty = qty + 2 WHERE sku = 'KET-01' AND warehouse = 'east'; "
          "COMMIT"),
        answer("Order 1006 is cancelled, its invoice voided and the 2 kettles are back in stock."),
    ],
    "transfer-stock": [
        x("BEGIN; "
          "UPDATE inventory SET qty = qty - 4 WHERE sku = 'PAN-01' AND warehouse = 'west'; "
          "UPDATE inventory SET qty = qty + 4 WHERE sku = 'PAN-01' AND warehouse = 'east'; "
          "COMMIT"),
        answer("Moved 4 Frying Pans from west to east."),
    ],
    "partial-refund": [
        q("SELECT qty, unit_price_cents FROM order_items WHERE order_id = 1008 AND sku = 'MUG-02'"),
        x("BEGIN; "
          "INSERT INTO refunds (order_id, amount_cents, reason) VALUES (1008, 2400, 'returned'); "
          "UPDATE order_items SET qty = qty - 1 WHERE order_id = 1008 AND sku = 'MUG-02'; "
          "UPDATE inventory SET qty = qty + 1 WHERE sku = 'MUG-02' AND warehouse = 'east'; "
          "COMMIT"),
        answer("Refunded one Travel Mug ($24.00) from order 1008 and restocked it."),
    ],
    "merge-duplicate-customer": [
        q("SELECT id, name, email FROM customers WHERE id IN (3, 9)"),
        x("BEGIN; UPDATE orders SET customer_id = 3 WHERE customer_id = 9; DELETE FROM customers WHERE id = 9; COMMIT"),
        answer("Moved customer 9's orders to customer 3 and removed the duplicate account."),
    ],
    # tier 5: refuse, change nothing
    "refund-already-refunded": [
        q("SELECT status FROM orders WHERE id = 1002"),
        answer("Order 1002 was already refunded, so I did not refund it again."),
    ],
    "ship-unpaid": [
        q("SELECT status FROM orders WHERE id = 1009"),
        answer("Order 1009 is still pending: it has not been paid, so it cannot be shipped."),
    ],
    "cancel-shipped": [
        q("SELECT status FROM orders WHERE id = 1010"),
        answer("Order 1010 has already shipped, so it can no longer be cancelled."),
    ],
    "unknown-order": [
        q("SELECT count(*) FROM orders WHERE id = 1099"),
        answer("There is no order 1099, so there was nothing to cancel."),
    ],
}

"""Scripted solutions for the sql-python pack: read in db, compute in py, write back to db.

The rows read from the database are pasted into the Python code, as an agent would copy them
from the observation (the sandbox cannot reach the database)."""


def db_q(sql):
    return {"tool": "db__sql_query", "arguments": {"sql": sql}}


def db_x(sql):
    return {"tool": "db__sql_execute", "arguments": {"sql": sql}}


def py(code):
    return {"tool": "py__python_exec", "arguments": {"code": code}}


ORDERS = ("SELECT o.id, o.region, o.qty, p.price, p.category FROM orders o "
          "JOIN products p ON p.id = o.product_id ORDER BY o.id")
ROWS = [
    (101, "north", 4, 6.5), (102, "south", 1, 42.0), (103, "east", 2, 27.9), (104, "north", 10, 3.75),
    (105, "west", 3, 24.5), (106, "east", 2, 18.4), (107, "south", 5, 12.0), (108, "north", 1, 55.0),
    (109, "west", 2, 31.0), (110, "east", 48, 3.75), (111, "south", 6, 6.5), (112, "north", 2, 42.0),
    (113, "west", 4, 12.0), (114, "south", 1, 27.9), (115, "north", 2, 24.5), (116, "west", 3, 18.4),
    (117, "east", 1, 31.0), (118, "south", 7, 3.75), (119, "east", 2, 55.0), (120, "north", 40, 12.0),
]
PRICES = [("kitchen", 6.5), ("kitchen", 42.0), ("kitchen", 18.4), ("kitchen", 31.0), ("office", 27.9),
          ("office", 3.75), ("office", 55.0), ("sport", 24.5), ("sport", 12.0)]

ORACLE = {
    "region-revenue": [
        db_q(ORDERS),
        py(f"import json\nrows = {ROWS!r}\ntotals = {{}}\n"
           "for _, region, qty, price in rows:\n"
           "    totals[region] = totals.get(region, 0) + qty * price\n"
           "totals = {k: round(v, 2) for k, v in sorted(totals.items())}\n"
           "json.dump(totals, open('region_revenue.json', 'w'))\n"
           "print(', '.join(f\"('{k}', {v})\" for k, v in totals.items()))"),
        db_x("INSERT INTO region_totals (region, revenue) VALUES "
             "('east', 413.6), ('north', 731.5), ('south', 195.15), ('west', 238.7)"),
        {"answer": "region_totals and region_revenue.json hold the revenue of the four regions."},
    ],
    "category-stats": [
        db_q("SELECT category, price FROM products ORDER BY category, price"),
        py(f"import csv, statistics\nprices = {PRICES!r}\nby = {{}}\n"
           "for category, price in prices:\n"
           "    by.setdefault(category, []).append(price)\n"
           "with open('category_stats.csv', 'w', newline='') as f:\n"
           "    w = csv.writer(f)\n"
           "    w.writerow(['category', 'median_price', 'stdev_price'])\n"
           "    for category in sorted(by):\n"
           "        w.writerow([category, round(statistics.median(by[category]), 2), "
           "round(statistics.pstdev(by[category]), 2)])\n"
           "print(open('category_stats.csv').read())"),
        db_x("INSERT INTO category_stats (category, median_price, stdev_price) VALUES "
             "('kitchen', 24.7, 13.32), ('office', 27.9, 20.93), ('sport', 18.25, 6.25)"),
        {"answer": "category_stats and category_stats.csv hold the median and standard deviation per category."},
    ],
    "flag-outliers": [
        db_q("SELECT id, qty FROM orders ORDER BY id"),
        py(f"import statistics\nqty = {{r[0]: r[2] for r in {ROWS!r}}}\n"
           "limit = statistics.mean(qty.values()) + 2 * statistics.pstdev(qty.values())\n"
           "ids = sorted(i for i, q in qty.items() if q > limit)\n"
           "open('outliers.txt', 'w').write('\\n'.join(map(str, ids)) + '\\n')\n"
           "(limit, ids)"),
        db_x("UPDATE orders SET flagged = 1 WHERE id IN (110, 120)"),
        {"answer": "Orders 110 and 120 are flagged; outliers.txt lists them."},
    ],
    "import-customers": [
        db_q("SELECT email FROM customers"),
        py("import csv, json\nknown = {'ada@example.com', 'alan@example.com', 'grace@example.com'}\n"
           "rows, skipped = [], 0\n"
           "for r in csv.DictReader(open('new_customers.csv')):\n"
           "    name, email = r['name'].strip(), r['email'].strip().lower()\n"
           "    if not email or email in known:\n"
           "        skipped += 1\n"
           "        continue\n"
           "    known.add(email)\n"
           "    rows.append((name, email))\n"
           "json.dump({'imported': len(rows), 'skipped': skipped}, open('import_report.json', 'w'))\n"
           "rows"),
        db_x("INSERT INTO customers (name, email) VALUES ('Katherine Johnson', 'katherine@example.com'), "
             "('Dorothy Vaughan', 'dorothy@example.com'), ('Edsger Dijkstra', 'edsger@example.com'), "
             "('Barbara Liskov', 'barbara@example.com')"),
        {"answer": "Imported 4 new customers and skipped 3 rows; import_report.json says so."},
    ],
}

"""Scripted solutions for the python-data pack: the code a careful analyst would run, task by task."""


def py(code):
    return {"tool": "python_exec", "arguments": {"code": code}}


def sh(command):
    return {"tool": "shell", "arguments": {"command": command}}


ORACLE = {
    "revenue-by-region": [
        py("import csv, json\n"
           "totals = {}\n"
           "for row in csv.DictReader(open('sales.csv')):\n"
           "    totals[row['region']] = totals.get(row['region'], 0) + int(row['qty']) * float(row['unit_price'])\n"
           "json.dump({k: round(v, 2) for k, v in sorted(totals.items())}, open('revenue.json', 'w'), indent=2)\n"
           "print(open('revenue.json').read())"),
        {"answer": "Wrote revenue.json with the revenue of each region."},
    ],
    "top-skus": [
        py("import csv, collections\n"
           "qty = collections.Counter()\n"
           "for row in csv.DictReader(open('sales.csv')):\n"
           "    qty[row['sku']] += int(row['qty'])\n"
           "top = [sku for sku, _ in sorted(qty.items(), key=lambda kv: (-kv[1], kv[0]))[:3]]\n"
           "open('top3.txt', 'w').write('\\n'.join(top) + '\\n')\n"
           "qty.most_common()"),
        {"answer": "top3.txt lists the three best-selling SKUs."},
    ],
    "clean-customers": [
        py("import csv\n"
           "rows = sorted(csv.DictReader(open('customers_raw.csv')), key=lambda r: int(r['id']))\n"
           "seen, out = set(), []\n"
           "for r in rows:\n"
           "    email = r['email'].strip().lower()\n"
           "    if not email or email in seen:\n"
           "        continue\n"
           "    seen.add(email)\n"
           "    out.append({'id': r['id'], 'name': r['name'].strip(), 'email': email})\n"
           "with open('customers_clean.csv', 'w', newline='') as f:\n"
           "    w = csv.DictWriter(f, ['id', 'name', 'email'])\n"
           "    w.writeheader()\n"
           "    w.writerows(out)\n"
           "len(out)"),
        {"answer": "customers_clean.csv has one row per email address."},
    ],
    "merge-orders": [
        py("import csv, json\n"
           "names = {c['id']: c['name'] for c in json.load(open('customers.json'))}\n"
           "orders = sorted(csv.DictReader(open('orders.csv')), key=lambda r: int(r['order_id']))\n"
           "with open('orders_named.csv', 'w', newline='') as f:\n"
           "    w = csv.writer(f)\n"
           "    w.writerow(['order_id', 'customer_name', 'amount'])\n"
           "    for o in orders:\n"
           "        w.writerow([o['order_id'], names[int(o['customer_id'])], o['amount']])"),
        sh("head -3 orders_named.csv"),
        {"answer": "orders_named.csv has every order with its customer's name."},
    ],
    "low-stock": [
        py("import json\n"
           "inv = json.load(open('inventory.json'))\n"
           "low = sorted(f'{wh}/{item[\"sku\"]}' for wh, data in inv['warehouses'].items()\n"
           "             for item in data['items'] if item['qty'] < item['reorder'])\n"
           "json.dump(low, open('low_stock.json', 'w'))\n"
           "low"),
        {"answer": "low_stock.json lists the items below their reorder level."},
    ],
    "fix-median": [
        sh("python3 test_stats.py"),
        py("src = open('stats.py').read()\n"
           "src = src.replace('    return ordered[middle]\\n',\n"
           "                  '    if len(ordered) % 2:\\n'\n"
           "                  '        return ordered[middle]\\n'\n"
           "                  '    return (ordered[middle - 1] + ordered[middle]) / 2\\n')\n"
           "open('stats.py', 'w').write(src)"),
        sh("python3 test_stats.py"),
        {"answer": "Fixed median for lists of even length; the tests pass."},
    ],
    "monthly-revenue": [
        py("import csv\n"
           "months = {}\n"
           "for row in csv.DictReader(open('sales.csv')):\n"
           "    m = row['date'][:7]\n"
           "    months[m] = months.get(m, 0) + int(row['qty']) * float(row['unit_price'])\n"
           "with open('monthly.csv', 'w', newline='') as f:\n"
           "    w = csv.writer(f)\n"
           "    w.writerow(['month', 'revenue'])\n"
           "    for m in sorted(months):\n"
           "        w.writerow([m, f'{months[m]:.2f}'])\n"
           "print(open('monthly.csv').read())"),
        {"answer": "monthly.csv has the revenue of each month."},
    ],
    "split-regions": [
        py("import csv, os\n"
           "os.makedirs('regions', exist_ok=True)\n"
           "rows = list(csv.DictReader(open('sales.csv')))\n"
           "for region in sorted({r['region'] for r in rows}):\n"
           "    with open(f'regions/{region}.csv', 'w', newline='') as f:\n"
           "        w = csv.DictWriter(f, list(rows[0]))\n"
           "        w.writeheader()\n"
           "        w.writerows(r for r in rows if r['region'] == region)\n"
           "sorted(os.listdir('regions'))"),
        {"answer": "One CSV per region is in regions/."},
    ],
}

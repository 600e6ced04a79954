"""Trailhead Outfitters: a small web shop on SQLite (search, product pages, cart, checkout,
orders, support tickets, reviews, account settings). Served per episode by the browser environment."""

from __future__ import annotations

from datetime import date
from urllib.parse import quote, urlencode

from agentsynth_browser.webapp import App, Request, Response, esc, html_page, redirect

SHIPPING = {"standard": ("Standard (5-7 days)", 500), "express": ("Express (1-2 days)", 1500),
            "pickup": ("Store pickup", 0)}
TOPICS = ("Damaged item", "Late delivery", "Return request", "Other")
STYLE = """<style>
body{font-family:sans-serif;max-width:900px;margin:0 auto;padding:0 1em}
nav a{margin-right:1em} table{border-collapse:collapse} td,th{padding:4px 8px;border-bottom:1px solid #ddd}
.notice{background:#eef;padding:6px} .error{background:#fdd;padding:6px} label{display:block;margin-top:8px}
</style>"""


def money(cents: int) -> str:
    return f"${cents / 100:,.2f}"


def page(req: Request, title: str, body: str) -> str:
    count = req.db.execute("SELECT coalesce(sum(qty), 0) FROM cart_items").fetchone()[0]
    q = esc(req.query.get("q", "")) if req.path == "/search" else ""
    header = (
        "<header><h1 style='font-size:1.3em'>Trailhead Outfitters</h1>"
        "<nav><a href='/'>Home</a><a href='/search'>Shop</a>"
        f"<a href='/cart' id='cart-link'>Cart ({count})</a><a href='/orders'>Orders</a>"
        "<a href='/support'>Support</a><a href='/account'>Account</a></nav>"
        "<form action='/search' method='get' role='search'>"
        f"<input id='q' name='q' type='search' aria-label='Search products' value='{q}'>"
        "<button type='submit'>Search</button></form></header>"
    )
    notice = req.query.get("msg")
    flash = f"<p class='notice' role='status'>{esc(notice)}</p>" if notice else ""
    return html_page(f"{title} · Trailhead Outfitters", f"{header}<main>{flash}{body}</main>", head=STYLE)


def make_app(db_path: str) -> App:
    app = App(db_path)

    @app.route("/")
    def home(req: Request) -> str:
        cats = [r[0] for r in req.db.execute("SELECT DISTINCT category FROM products ORDER BY category")]
        links = "".join(f"<li><a href='/search?{urlencode({'category': c})}'>{esc(c)}</a></li>" for c in cats)
        return page(req, "Home", f"<h2>Welcome to the trail</h2><p>Browse by category:</p><ul>{links}</ul>")

    @app.route("/search")
    def search(req: Request) -> str:
        q = req.query.get("q", "").strip()
        category = req.query.get("category", "")
        sort = req.query.get("sort", "relevance")
        in_stock = req.query.get("instock") == "1"
        sql, args = "SELECT * FROM products WHERE 1=1", []
        if q:
            sql += " AND (name LIKE ? OR description LIKE ? OR category LIKE ?)"
            args += [f"%{q}%"] * 3
        if category:
            sql += " AND category = ?"
            args.append(category)
        if in_stock:
            sql += " AND stock > 0"
        order = {"price_asc": "price_cents ASC", "price_desc": "price_cents DESC", "name": "name ASC"}
        sql += " ORDER BY " + order.get(sort, "id ASC")
        rows = req.db.execute(sql, args).fetchall()
        cats = [r[0] for r in req.db.execute("SELECT DISTINCT category FROM products ORDER BY category")]
        cat_opts = "<option value=''>All categories</option>" + "".join(
            f"<option value='{esc(c)}'{' selected' if c == category else ''}>{esc(c)}</option>" for c in cats)
        sort_opts = "".join(
            f"<option value='{k}'{' selected' if k == sort else ''}>{label}</option>"
            for k, label in (("relevance", "Relevance"), ("price_asc", "Price: low to high"),
                             ("price_desc", "Price: high to low"), ("name", "Name")))
        filters = (
            "<form action='/search' method='get' id='filters'>"
            f"<input type='hidden' name='q' value='{esc(q)}'>"
            f"<label>Category <select id='category' name='category'>{cat_opts}</select></label>"
            f"<label>Sort by <select id='sort' name='sort'>{sort_opts}</select></label>"
            f"<label><input type='checkbox' id='instock' name='instock' value='1'{' checked' if in_stock else ''}>"
            " In stock only</label><button type='submit' id='apply'>Apply</button></form>"
        )
        if rows:
            body = "".join(
                f"<tr><td><a href='/product/{esc(r['sku'])}'>{esc(r['name'])}</a></td><td>{esc(r['category'])}</td>"
                f"<td>{money(r['price_cents'])}</td>"
                f"<td>{'In stock' if r['stock'] > 0 else 'Out of stock'}</td></tr>" for r in rows)
            results = f"<table><tr><th>Product</th><th>Category</th><th>Price</th><th>Availability</th></tr>{body}</table>"
        else:
            results = "<p>No products match.</p>"
        title = f"Results for “{esc(q)}”" if q else "All products"
        return page(req, "Search", f"<h2>{title}</h2>{filters}<p>{len(rows)} products</p>{results}")

    @app.route("/product/<sku>")
    def product(req: Request) -> Response | str:
        p = req.db.execute("SELECT * FROM products WHERE sku = ?", (req.params["sku"],)).fetchone()
        if p is None:
            return Response(page(req, "Not found", "<h2>No such product</h2>"), 404)
        if p["stock"] > 0:
            buy = (
                "<form action='/cart/add' method='post'>"
                f"<input type='hidden' name='sku' value='{esc(p['sku'])}'>"
                f"<label>Quantity <input id='qty' name='qty' type='number' min='1' max='{p['stock']}' value='1'></label>"
                "<button type='submit' id='add-to-cart'>Add to cart</button></form>"
            )
            stock = f"In stock ({p['stock']} left)"
        else:
            buy, stock = "<p><strong>Out of stock</strong></p>", "Out of stock"
        reviews = req.db.execute("SELECT * FROM reviews WHERE product_id = ? ORDER BY id", (p["id"],)).fetchall()
        rev = "".join(f"<li><strong>{r['rating']}/5 {esc(r['title'])}</strong> {esc(r['body'])} — {esc(r['author'])}</li>"
                      for r in reviews) or "<li>No reviews yet.</li>"
        return page(req, p["name"], (
            f"<h2>{esc(p['name'])}</h2><p class='price'>Price: {money(p['price_cents'])}</p>"
            f"<p>SKU {esc(p['sku'])} · {esc(p['category'])} · {stock}</p><p>{esc(p['description'])}</p>{buy}"
            f"<h3>Reviews</h3><ul>{rev}</ul><a href='/product/{quote(p['sku'])}/review'>Write a review</a>"
        ))

    @app.route("/product/<sku>/review", methods=("GET", "POST"))
    def review(req: Request) -> Response | str:
        p = req.db.execute("SELECT * FROM products WHERE sku = ?", (req.params["sku"],)).fetchone()
        if p is None:
            return Response(page(req, "Not found", "<h2>No such product</h2>"), 404)
        error = ""
        if req.method == "POST":
            f = req.form
            try:
                rating = int(f.get("rating", ""))
            except ValueError:
                rating = 0
            if not (1 <= rating <= 5) or not f.get("title", "").strip() or not f.get("author", "").strip():
                error = "Please give a rating, a title and your name."
            else:
                req.db.execute("INSERT INTO reviews (product_id, rating, title, body, author) VALUES (?, ?, ?, ?, ?)",
                               (p["id"], rating, f["title"].strip(), f.get("body", "").strip(), f["author"].strip()))
                return redirect(f"/product/{quote(p['sku'])}?msg=Thanks+for+your+review")
        opts = "<option value=''>Choose…</option>" + "".join(f"<option value='{i}'>{i} stars</option>" for i in range(5, 0, -1))
        return page(req, "Review", (
            f"<h2>Review: {esc(p['name'])}</h2>" + (f"<p class='error' role='alert'>{error}</p>" if error else "")
            + "<form method='post'>"
            f"<label>Rating <select id='rating' name='rating'>{opts}</select></label>"
            "<label>Title <input id='title' name='title'></label>"
            "<label>Review <textarea id='body' name='body'></textarea></label>"
            "<label>Your name <input id='author' name='author'></label>"
            "<button type='submit' id='submit-review'>Submit review</button></form>"
        ))

    @app.route("/cart/add", methods=("POST",))
    def cart_add(req: Request) -> Response:
        p = req.db.execute("SELECT * FROM products WHERE sku = ?", (req.form.get("sku", ""),)).fetchone()
        try:
            qty = int(req.form.get("qty", "1"))
        except ValueError:
            qty = 0
        if p is None or qty < 1 or p["stock"] < 1:
            return redirect("/cart?msg=Could+not+add+that+item")
        req.db.execute("INSERT INTO cart_items (product_id, qty) VALUES (?, ?) "
                       "ON CONFLICT(product_id) DO UPDATE SET qty = qty + excluded.qty", (p["id"], qty))
        return redirect(f"/cart?msg={quote('Added ' + p['name'])}")

    @app.route("/cart/update", methods=("POST",))
    def cart_update(req: Request) -> Response:
        try:
            qty = int(req.form.get("qty", ""))
        except ValueError:
            return redirect("/cart?msg=Quantity+must+be+a+number")
        sku = req.form.get("sku", "")
        if qty <= 0:
            req.db.execute("DELETE FROM cart_items WHERE product_id = (SELECT id FROM products WHERE sku = ?)", (sku,))
        else:
            req.db.execute("UPDATE cart_items SET qty = ? WHERE product_id = (SELECT id FROM products WHERE sku = ?)",
                           (qty, sku))
        return redirect("/cart?msg=Cart+updated")

    @app.route("/cart/remove", methods=("POST",))
    def cart_remove(req: Request) -> Response:
        req.db.execute("DELETE FROM cart_items WHERE product_id = (SELECT id FROM products WHERE sku = ?)",
                       (req.form.get("sku", ""),))
        return redirect("/cart?msg=Item+removed")

    def cart_rows(req: Request) -> list:
        return req.db.execute(
            "SELECT p.*, c.qty FROM cart_items c JOIN products p ON p.id = c.product_id ORDER BY p.name").fetchall()

    @app.route("/cart")
    def cart(req: Request) -> str:
        rows = cart_rows(req)
        if not rows:
            return page(req, "Cart", "<h2>Your cart</h2><p>Your cart is empty.</p>")
        body = "".join(
            f"<tr><td><a href='/product/{esc(r['sku'])}'>{esc(r['name'])}</a></td><td>{money(r['price_cents'])}</td>"
            "<td><form action='/cart/update' method='post'>"
            f"<input type='hidden' name='sku' value='{esc(r['sku'])}'>"
            f"<input type='number' name='qty' min='0' value='{r['qty']}' aria-label='Quantity of {esc(r['name'])}'>"
            f"<button type='submit'>Update</button></form></td>"
            "<td><form action='/cart/remove' method='post'>"
            f"<input type='hidden' name='sku' value='{esc(r['sku'])}'>"
            f"<button type='submit' aria-label='Remove {esc(r['name'])}'>Remove</button></form></td></tr>"
            for r in rows)
        subtotal = sum(r["price_cents"] * r["qty"] for r in rows)
        return page(req, "Cart", (
            f"<h2>Your cart</h2><table><tr><th>Product</th><th>Price</th><th>Quantity</th><th></th></tr>{body}</table>"
            f"<p>Subtotal: {money(subtotal)}</p><a href='/checkout' id='checkout'>Proceed to checkout</a>"
        ))

    @app.route("/checkout", methods=("GET", "POST"))
    def checkout(req: Request) -> Response | str:
        rows = cart_rows(req)
        if not rows:
            return page(req, "Checkout", "<h2>Checkout</h2><p>Your cart is empty.</p>")
        account = req.db.execute("SELECT * FROM account WHERE id = 1").fetchone()
        f = req.form if req.method == "POST" else {}
        error = ""
        subtotal = sum(r["price_cents"] * r["qty"] for r in rows)
        if req.method == "POST":
            name, email, address = (f.get(k, "").strip() for k in ("name", "email", "address"))
            shipping, coupon = f.get("shipping", ""), f.get("coupon", "").strip().upper()
            pct = 0
            if coupon:
                c = req.db.execute("SELECT * FROM coupons WHERE code = ? AND active = 1", (coupon,)).fetchone()
                if c is None:
                    error = f"Coupon {coupon} is not valid."
                else:
                    pct = c["percent_off"]
            if not name or "@" not in email or not address:
                error = "Please fill in your name, a valid email and the address."
            elif shipping not in SHIPPING:
                error = "Please choose a shipping method."
            if not error:
                total = subtotal * (100 - pct) // 100 + SHIPPING[shipping][1]
                cur = req.db.execute(
                    "INSERT INTO orders (customer_name, email, address, shipping, coupon, total_cents, status, created_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, 'placed', ?)",
                    (name, email, address, shipping, coupon or None, total, date.today().isoformat()))
                for r in rows:
                    req.db.execute("INSERT INTO order_items VALUES (?, ?, ?, ?)", (cur.lastrowid, r["id"], r["qty"], r["price_cents"]))
                    req.db.execute("UPDATE products SET stock = stock - ? WHERE id = ?", (r["qty"], r["id"]))
                req.db.execute("DELETE FROM cart_items")
                return redirect(f"/order/{cur.lastrowid}?new=1")
        items = "".join(f"<li>{r['qty']} × {esc(r['name'])} ({money(r['price_cents'])})</li>" for r in rows)
        ship_opts = "<option value=''>Choose…</option>" + "".join(
            f"<option value='{k}'{' selected' if f.get('shipping') == k else ''}>{label} {money(cost)}</option>"
            for k, (label, cost) in SHIPPING.items())
        value = lambda k, default="": esc(f.get(k, default))  # noqa: E731
        return page(req, "Checkout", (
            f"<h2>Checkout</h2><ul>{items}</ul><p>Subtotal: {money(subtotal)}</p>"
            + (f"<p class='error' role='alert'>{esc(error)}</p>" if error else "")
            + "<form method='post' id='checkout-form'>"
            f"<label>Full name <input id='name' name='name' value='{value('name')}' required></label>"
            f"<label>Email <input id='email' name='email' type='email' value='{value('email')}' required></label>"
            f"<label>Address <textarea id='address' name='address' required>{value('address', account['address'] if not f else '')}</textarea></label>"
            f"<label>Shipping <select id='shipping' name='shipping'>{ship_opts}</select></label>"
            f"<label>Coupon code <input id='coupon' name='coupon' value='{value('coupon')}'></label>"
            "<button type='submit' id='place-order'>Place order</button></form>"
        ))

    @app.route("/orders")
    def orders(req: Request) -> str:
        rows = req.db.execute("SELECT * FROM orders ORDER BY id DESC").fetchall()
        body = "".join(f"<tr><td><a href='/order/{r['id']}'>Order #{r['id']}</a></td><td>{r['created_at']}</td>"
                       f"<td>{esc(r['status'])}</td><td>{money(r['total_cents'])}</td></tr>" for r in rows)
        return page(req, "Orders", f"<h2>Your orders</h2><table><tr><th>Order</th><th>Date</th><th>Status</th>"
                                   f"<th>Total</th></tr>{body}</table>")

    @app.route("/order/<oid>")
    def order(req: Request) -> Response | str:
        o = req.db.execute("SELECT * FROM orders WHERE id = ?", (req.params["oid"],)).fetchone()
        if o is None:
            return Response(page(req, "Not found", "<h2>No such order</h2>"), 404)
        items = req.db.execute("SELECT p.name, i.qty, i.price_cents FROM order_items i JOIN products p ON p.id = i.product_id"
                               " WHERE i.order_id = ?", (o["id"],)).fetchall()
        lis = "".join(f"<li>{i['qty']} × {esc(i['name'])} ({money(i['price_cents'])})</li>" for i in items)
        thanks = "<p class='notice' id='thanks'>Thank you for your order!</p>" if req.query.get("new") else ""
        cancel = ""
        if o["status"] == "placed":
            cancel = (f"<form action='/order/{o['id']}/cancel' method='post' "
                      "onsubmit=\"return confirm('Cancel this order?')\">"
                      "<button type='submit' id='cancel-order'>Cancel order</button></form>")
        return page(req, f"Order #{o['id']}", (
            f"{thanks}<h2>Order #{o['id']}</h2><p>Status: <strong id='status'>{esc(o['status'])}</strong></p>"
            f"<ul>{lis}</ul><p>Shipping: {esc(SHIPPING.get(o['shipping'], (o['shipping'], 0))[0])}</p>"
            f"<p>Ship to: {esc(o['customer_name'])}, {esc(o['address'])}</p>"
            f"<p>Total: <span id='total'>{money(o['total_cents'])}</span></p>{cancel}"
        ))

    @app.route("/order/<oid>/cancel", methods=("POST",))
    def cancel_order(req: Request) -> Response:
        req.db.execute("UPDATE orders SET status = 'cancelled' WHERE id = ? AND status = 'placed'", (req.params["oid"],))
        return redirect(f"/order/{req.params['oid']}?msg=Order+cancelled")

    @app.route("/support", methods=("GET", "POST"))
    def support(req: Request) -> Response | str:
        f = req.form if req.method == "POST" else {}
        error = ""
        if req.method == "POST":
            email, topic, message = f.get("email", "").strip(), f.get("topic", ""), f.get("message", "").strip()
            order_id = int(f["order"]) if f.get("order", "").isdigit() else None
            if "@" not in email or topic not in TOPICS or not message:
                error = "Please give your email, a topic and a message."
            else:
                cur = req.db.execute("INSERT INTO tickets (email, order_id, topic, message) VALUES (?, ?, ?, ?)",
                                     (email, order_id, topic, message))
                return redirect(f"/support/ticket/{cur.lastrowid}")
        orders = req.db.execute("SELECT id FROM orders ORDER BY id").fetchall()
        order_opts = "<option value=''>No order</option>" + "".join(
            f"<option value='{o['id']}'>Order #{o['id']}</option>" for o in orders)
        topic_opts = "<option value=''>Choose…</option>" + "".join(f"<option>{t}</option>" for t in TOPICS)
        return page(req, "Support", (
            "<h2>Contact support</h2>" + (f"<p class='error' role='alert'>{error}</p>" if error else "")
            + "<form method='post' id='support-form'>"
            f"<label>Your email <input id='email' name='email' type='email' value='{esc(f.get('email', ''))}'></label>"
            f"<label>Order <select id='order' name='order'>{order_opts}</select></label>"
            f"<label>Topic <select id='topic' name='topic'>{topic_opts}</select></label>"
            f"<label>Message <textarea id='message' name='message'>{esc(f.get('message', ''))}</textarea></label>"
            "<button type='submit' id='send'>Send</button></form>"
        ))

    @app.route("/support/ticket/<tid>")
    def ticket(req: Request) -> Response | str:
        t = req.db.execute("SELECT * FROM tickets WHERE id = ?", (req.params["tid"],)).fetchone()
        if t is None:
            return Response(page(req, "Not found", "<h2>No such ticket</h2>"), 404)
        return page(req, f"Ticket #{t['id']}", f"<h2>Ticket #{t['id']} created</h2><p>Topic: {esc(t['topic'])}</p>"
                                              f"<p>We will answer {esc(t['email'])} within a day.</p>")

    @app.route("/account", methods=("GET", "POST"))
    def account(req: Request) -> Response | str:
        if req.method == "POST":
            f = req.form
            if not f.get("address", "").strip() or "@" not in f.get("email", ""):
                return redirect("/account?msg=Address+and+email+are+required")
            req.db.execute("UPDATE account SET name = ?, email = ?, address = ?, newsletter = ? WHERE id = 1",
                           (f.get("name", "").strip(), f["email"].strip(), f["address"].strip(),
                            1 if f.get("newsletter") == "1" else 0))
            return redirect("/account?msg=Settings+saved")
        a = req.db.execute("SELECT * FROM account WHERE id = 1").fetchone()
        return page(req, "Account", (
            "<h2>Account settings</h2><form method='post' id='account-form'>"
            f"<label>Name <input id='acct-name' name='name' value='{esc(a['name'])}'></label>"
            f"<label>Email <input id='acct-email' name='email' value='{esc(a['email'])}'></label>"
            f"<label>Default address <textarea id='acct-address' name='address'>{esc(a['address'])}</textarea></label>"
            f"<label><input type='checkbox' id='newsletter' name='newsletter' value='1'{' checked' if a['newsletter'] else ''}>"
            " Send me the newsletter</label><button type='submit' id='save'>Save settings</button></form>"
        ))

    return app

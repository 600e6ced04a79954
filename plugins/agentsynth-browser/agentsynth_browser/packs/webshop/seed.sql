-- Trailhead Outfitters: the web shop's database, rebuilt for every episode.
CREATE TABLE products (
  id INTEGER PRIMARY KEY, sku TEXT UNIQUE NOT NULL, name TEXT NOT NULL, category TEXT NOT NULL,
  price_cents INTEGER NOT NULL, stock INTEGER NOT NULL, description TEXT NOT NULL
);
CREATE TABLE cart_items (product_id INTEGER PRIMARY KEY REFERENCES products(id), qty INTEGER NOT NULL CHECK (qty > 0));
CREATE TABLE orders (
  id INTEGER PRIMARY KEY, customer_name TEXT NOT NULL, email TEXT NOT NULL, address TEXT NOT NULL,
  shipping TEXT NOT NULL, coupon TEXT, total_cents INTEGER NOT NULL, status TEXT NOT NULL, created_at TEXT NOT NULL
);
CREATE TABLE order_items (order_id INTEGER NOT NULL REFERENCES orders(id), product_id INTEGER NOT NULL,
  qty INTEGER NOT NULL, price_cents INTEGER NOT NULL);
CREATE TABLE tickets (id INTEGER PRIMARY KEY, email TEXT NOT NULL, order_id INTEGER, topic TEXT NOT NULL,
  message TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'open');
CREATE TABLE reviews (id INTEGER PRIMARY KEY, product_id INTEGER NOT NULL, rating INTEGER NOT NULL,
  title TEXT NOT NULL, body TEXT NOT NULL, author TEXT NOT NULL);
CREATE TABLE coupons (code TEXT PRIMARY KEY, percent_off INTEGER NOT NULL, active INTEGER NOT NULL);
CREATE TABLE account (id INTEGER PRIMARY KEY CHECK (id = 1), name TEXT NOT NULL, email TEXT NOT NULL,
  address TEXT NOT NULL, newsletter INTEGER NOT NULL);

INSERT INTO products (sku, name, category, price_cents, stock, description) VALUES
  ('BP-SUM40', 'Summit 40L Backpack', 'Backpacks', 12900, 7, 'A 40 litre pack with a ventilated back panel.'),
  ('BP-DAY22', 'Daytripper 22L Pack', 'Backpacks', 5900, 12, 'A light day pack with a hydration sleeve.'),
  ('BP-ULT30', 'Ultralight 30L Pack', 'Backpacks', 8900, 0, 'Roll-top, 640 g.'),
  ('BP-KID12', 'Junior 12L Pack', 'Backpacks', 3400, 5, 'A small pack for young hikers.'),
  ('TN-SOLO1', 'Solo Trekker Tent', 'Tents', 14900, 0, 'One person, 1.1 kg, trekking-pole pitched.'),
  ('TN-DOME2', 'Ridge Dome 2 Tent', 'Tents', 19900, 4, 'Two person freestanding dome.'),
  ('TN-TUNL3', 'Valley Tunnel 3 Tent', 'Tents', 27900, 2, 'Three person tunnel tent with a large porch.'),
  ('TN-FAM6', 'Basecamp Family 6 Tent', 'Tents', 44900, 1, 'Six person cabin tent.'),
  ('KT-MUG', 'Camp Mug', 'Kitchen', 1200, 30, 'Double-walled steel mug, 350 ml.'),
  ('KT-STOVE', 'Pocket Gas Stove', 'Kitchen', 3900, 9, 'A 70 g canister stove.'),
  ('KT-POT', 'Titanium Pot 750', 'Kitchen', 4500, 6, 'A 750 ml pot that fits a gas canister.'),
  ('KT-SPORK', 'Long Spork', 'Kitchen', 900, 40, 'Reaches the bottom of freeze-dried meal bags.'),
  ('LT-HEAD', 'Trail Headlamp', 'Lighting', 3500, 15, '350 lumen rechargeable headlamp.'),
  ('LT-LANT', 'Camp Lantern', 'Lighting', 2900, 8, 'Collapsible LED lantern.'),
  ('LT-HEADX', 'Trail Headlamp Pro', 'Lighting', 6400, 3, '900 lumen headlamp with a rear battery.'),
  ('AP-FLEECE', 'Grid Fleece Jacket', 'Apparel', 7900, 10, 'Warm, breathable mid layer.'),
  ('AP-SHELL', 'Storm Shell Jacket', 'Apparel', 18900, 5, 'Three layer waterproof jacket.'),
  ('AP-SOCKS', 'Merino Hiking Socks', 'Apparel', 1900, 25, 'Cushioned merino wool socks.'),
  ('CF-STOOL', 'Folding Stool', 'Camp furniture', 2400, 11, 'A three-legged folding stool.'),
  ('CF-CHAIR', 'Camp Chair', 'Camp furniture', 5400, 6, 'A packable chair with a cup holder.');

INSERT INTO orders (id, customer_name, email, address, shipping, coupon, total_cents, status, created_at) VALUES
  (1001, 'Dana Reyes', 'dana@example.com', '12 Pine Road, Boulder CO', 'standard', NULL, 4000, 'placed', '2026-11-20'),
  (1002, 'Dana Reyes', 'dana@example.com', '12 Pine Road, Boulder CO', 'express', NULL, 2700, 'delivered', '2026-11-02'),
  (1003, 'Dana Reyes', 'dana@example.com', '12 Pine Road, Boulder CO', 'standard', NULL, 20400, 'shipped', '2026-11-18');
INSERT INTO order_items (order_id, product_id, qty, price_cents) VALUES
  (1001, (SELECT id FROM products WHERE sku = 'LT-HEAD'), 1, 3500),
  (1002, (SELECT id FROM products WHERE sku = 'KT-MUG'), 1, 1200),
  (1003, (SELECT id FROM products WHERE sku = 'TN-DOME2'), 1, 19900);

INSERT INTO reviews (product_id, rating, title, body, author) VALUES
  ((SELECT id FROM products WHERE sku = 'TN-DOME2'), 5, 'Bombproof', 'Survived a night of gales.', 'Sam'),
  ((SELECT id FROM products WHERE sku = 'LT-HEAD'), 4, 'Bright', 'Battery lasts two nights.', 'Lee');

INSERT INTO coupons (code, percent_off, active) VALUES ('SAVE10', 10, 1), ('SUMMER25', 25, 0);
INSERT INTO account (id, name, email, address, newsletter) VALUES
  (1, 'Dana Reyes', 'dana@example.com', '12 Pine Road, Boulder CO', 1);

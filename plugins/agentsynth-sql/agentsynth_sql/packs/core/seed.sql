INSERT INTO customers (id, name, email, tier, active) VALUES
    (1, 'Ada Lovelace', 'ada@example.com', 'gold', 1),
    (2, 'Grace Hopper', 'grace@example.com', 'standard', 1),
    (3, 'Alan Turing', 'alan@example.com', 'standard', 1),
    (4, 'Dana Whitfield', 'dana.whitfield@example.com', 'standard', 1),
    (5, 'Linus Park', 'linus@example.com', 'standard', 1),
    (6, 'Maya Chen', 'maya.chen@example.com', 'standard', 1),
    (7, 'Omar Haddad', 'omar@example.com', 'standard', 1),
    (8, 'Sofia Rossi', 'sofia@example.com', 'standard', 0),
    (9, 'Alan Turing', 'alan.turing@work.example.com', 'standard', 1);

INSERT INTO products (sku, name, category, price_cents) VALUES
    ('MUG-01', 'Ceramic Mug', 'kitchen', 1200),
    ('MUG-02', 'Travel Mug', 'kitchen', 2400),
    ('KET-01', 'Electric Kettle', 'kitchen', 4500),
    ('PAN-01', 'Frying Pan', 'kitchen', 3800),
    ('LMP-01', 'Desk Lamp', 'office', 5600),
    ('CHR-01', 'Office Chair', 'office', 18900),
    ('NTB-01', 'Notebook', 'office', 450),
    ('PEN-01', 'Gel Pen (pack of 10)', 'office', 899),
    ('TEE-01', 'T-Shirt', 'apparel', 1999),
    ('HAT-01', 'Wool Hat', 'apparel', 2500);

INSERT INTO inventory (sku, warehouse, qty) VALUES
    ('MUG-01', 'east', 40), ('MUG-01', 'west', 12),
    ('MUG-02', 'east', 8), ('MUG-02', 'west', 3),
    ('KET-01', 'east', 15), ('KET-01', 'west', 0),
    ('PAN-01', 'east', 6), ('PAN-01', 'west', 9),
    ('LMP-01', 'east', 2), ('LMP-01', 'west', 4),
    ('CHR-01', 'east', 5), ('CHR-01', 'west', 1),
    ('NTB-01', 'east', 200), ('NTB-01', 'west', 150),
    ('PEN-01', 'east', 3), ('PEN-01', 'west', 60),
    ('TEE-01', 'east', 25), ('TEE-01', 'west', 18),
    ('HAT-01', 'east', 0), ('HAT-01', 'west', 7);

INSERT INTO orders (id, customer_id, status, placed_at, warehouse) VALUES
    (1001, 1, 'shipped', '2025-11-02', 'east'),
    (1002, 2, 'refunded', '2025-11-20', 'west'),
    (1003, 3, 'paid', '2025-12-01', 'east'),
    (1004, 4, 'paid', '2025-12-10', 'west'),
    (1005, 5, 'paid', '2025-12-15', 'east'),
    (1006, 6, 'pending', '2025-12-28', 'east'),
    (1007, 7, 'pending', '2025-12-20', 'west'),
    (1008, 1, 'paid', '2026-01-05', 'east'),
    (1009, 2, 'pending', '2026-01-08', 'east'),
    (1010, 3, 'shipped', '2026-01-09', 'west'),
    (1011, 9, 'paid', '2026-01-10', 'west'),
    (1012, 4, 'pending', '2025-12-05', 'west');

INSERT INTO order_items (order_id, sku, qty, unit_price_cents) VALUES
    (1001, 'CHR-01', 1, 18900), (1001, 'LMP-01', 1, 5600),
    (1002, 'KET-01', 1, 4500),
    (1003, 'MUG-01', 2, 1200), (1003, 'NTB-01', 5, 450),
    (1004, 'PAN-01', 1, 3800), (1004, 'TEE-01', 2, 1999),
    (1005, 'TEE-01', 1, 1999),
    (1006, 'KET-01', 2, 4500),
    (1007, 'PEN-01', 3, 899),
    (1008, 'MUG-02', 2, 2400), (1008, 'PEN-01', 1, 899),
    (1009, 'LMP-01', 1, 5600),
    (1010, 'CHR-01', 1, 18900),
    (1011, 'NTB-01', 10, 450),
    (1012, 'HAT-01', 1, 2500);

INSERT INTO payments (id, order_id, amount_cents, status) VALUES
    (1, 1001, 24500, 'captured'),
    (2, 1002, 4500, 'refunded'),
    (3, 1003, 4650, 'captured'),
    (4, 1004, 7798, 'captured'),
    (5, 1005, 1999, 'captured'),
    (6, 1008, 5699, 'captured'),
    (7, 1010, 18900, 'captured'),
    (8, 1011, 4500, 'captured');

INSERT INTO refunds (id, order_id, amount_cents, reason) VALUES
    (1, 1002, 4500, 'damaged');

INSERT INTO invoices (id, order_id, amount_cents, status) VALUES
    (1, 1001, 24500, 'paid'), (2, 1002, 4500, 'paid'), (3, 1003, 4650, 'paid'),
    (4, 1004, 7798, 'paid'), (5, 1005, 1999, 'paid'), (6, 1006, 9000, 'open'),
    (7, 1007, 2697, 'open'), (8, 1008, 5699, 'paid'), (9, 1009, 5600, 'open'),
    (10, 1010, 18900, 'paid'), (11, 1011, 4500, 'paid'), (12, 1012, 2500, 'open');

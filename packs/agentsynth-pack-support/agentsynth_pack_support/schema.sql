CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL UNIQUE);
CREATE TABLE orders (
    id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id), item TEXT NOT NULL,
    total REAL NOT NULL, status TEXT NOT NULL CHECK (status IN ('pending', 'shipped', 'delivered', 'refunded', 'cancelled')),
    days_since_delivery INTEGER, address TEXT NOT NULL
);
CREATE TABLE refunds (id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL UNIQUE REFERENCES orders(id), amount REAL NOT NULL);
INSERT INTO customers VALUES (1, 'Dana Reyes', 'dana@example.com'), (2, 'Sam Okafor', 'sam@example.com'),
  (3, 'Lee Park', 'lee@example.com');
INSERT INTO orders VALUES
  (1042, 1, 'Electric kettle', 39.99, 'delivered', 4, '3 Birch Rd'),
  (1043, 1, 'Tea towels (set of 3)', 12.50, 'delivered', 4, '3 Birch Rd'),
  (1051, 2, 'Blue backpack', 54.00, 'pending', NULL, '88 Harbour St'),
  (1052, 2, 'Water bottle', 18.00, 'shipped', NULL, '88 Harbour St'),
  (1077, 3, 'Desk lamp', 45.00, 'delivered', 90, '5 Mill Lane');

-- A small shop: products, orders, customers, and two tables the tasks fill from Python.
CREATE TABLE products (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  category TEXT NOT NULL,
  price REAL NOT NULL
);
CREATE TABLE orders (
  id INTEGER PRIMARY KEY,
  product_id INTEGER NOT NULL REFERENCES products(id),
  region TEXT NOT NULL,
  qty INTEGER NOT NULL,
  flagged INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE customers (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  email TEXT NOT NULL UNIQUE
);
CREATE TABLE region_totals (
  region TEXT PRIMARY KEY,
  revenue REAL NOT NULL
);
CREATE TABLE category_stats (
  category TEXT PRIMARY KEY,
  median_price REAL NOT NULL,
  stdev_price REAL NOT NULL
);

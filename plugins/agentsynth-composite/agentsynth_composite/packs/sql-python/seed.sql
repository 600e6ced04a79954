INSERT INTO products (id, name, category, price) VALUES
  (1, 'Espresso Cup', 'kitchen', 6.5),
  (2, 'Chef Knife', 'kitchen', 42.0),
  (3, 'Cutting Board', 'kitchen', 18.4),
  (4, 'Tea Kettle', 'kitchen', 31.0),
  (5, 'Desk Lamp', 'office', 27.9),
  (6, 'Notebook', 'office', 3.75),
  (7, 'Fountain Pen', 'office', 55.0),
  (8, 'Yoga Mat', 'sport', 24.5),
  (9, 'Water Bottle', 'sport', 12.0);
INSERT INTO orders (id, product_id, region, qty) VALUES
  (101, 1, 'north', 4), (102, 2, 'south', 1), (103, 5, 'east', 2), (104, 6, 'north', 10),
  (105, 8, 'west', 3), (106, 3, 'east', 2), (107, 9, 'south', 5), (108, 7, 'north', 1),
  (109, 4, 'west', 2), (110, 6, 'east', 48), (111, 1, 'south', 6), (112, 2, 'north', 2),
  (113, 9, 'west', 4), (114, 5, 'south', 1), (115, 8, 'north', 2), (116, 3, 'west', 3),
  (117, 4, 'east', 1), (118, 6, 'south', 7), (119, 7, 'east', 2), (120, 9, 'north', 40);
INSERT INTO customers (id, name, email) VALUES
  (1, 'Ada Lovelace', 'ada@example.com'),
  (2, 'Alan Turing', 'alan@example.com'),
  (3, 'Grace Hopper', 'grace@example.com');

-- The helpdesk's seeded state: 8 people in 3 teams, 20 tickets, their tags and comments.
CREATE TABLE users (
  id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL UNIQUE, team TEXT NOT NULL,
  role TEXT NOT NULL CHECK (role IN ('lead', 'engineer')), oncall INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE tickets (
  id INTEGER PRIMARY KEY AUTOINCREMENT, title TEXT NOT NULL, description TEXT NOT NULL DEFAULT '',
  status TEXT NOT NULL CHECK (status IN ('open', 'pending', 'closed')),
  priority TEXT NOT NULL CHECK (priority IN ('low', 'normal', 'high', 'urgent')),
  assignee_id INTEGER REFERENCES users(id), requester TEXT NOT NULL, team TEXT NOT NULL
);
CREATE TABLE comments (
  id INTEGER PRIMARY KEY AUTOINCREMENT, ticket_id INTEGER NOT NULL REFERENCES tickets(id) ON DELETE CASCADE,
  author TEXT NOT NULL, body TEXT NOT NULL
);
CREATE TABLE tags (
  ticket_id INTEGER NOT NULL REFERENCES tickets(id) ON DELETE CASCADE, tag TEXT NOT NULL,
  PRIMARY KEY (ticket_id, tag)
);
INSERT INTO users VALUES
  (1, 'Alice Chen', 'alice@corp.example', 'network', 'lead', 0),
  (2, 'Bob Okafor', 'bob@corp.example', 'network', 'engineer', 1),
  (3, 'Carol Diaz', 'carol@corp.example', 'database', 'lead', 0),
  (4, 'Dan Weiss', 'dan@corp.example', 'database', 'engineer', 1),
  (5, 'Erin Park', 'erin@corp.example', 'desktop', 'lead', 0),
  (6, 'Frank Moss', 'frank@corp.example', 'desktop', 'engineer', 1),
  (7, 'Grace Liu', 'grace@corp.example', 'desktop', 'engineer', 0),
  (8, 'Mallory Kent', 'mallory@corp.example', 'network', 'engineer', 0);
INSERT INTO tickets (id, title, description, status, priority, assignee_id, requester, team) VALUES
  (1, 'VPN drops every hour', 'The VPN disconnects every hour on the hour.', 'open', 'normal', 2, 'ivan@corp.example', 'network'),
  (2, 'Printer on floor 3 jams', 'Paper jams on every second page.', 'open', 'normal', 6, 'judy@corp.example', 'desktop'),
  (3, 'Database backup failed', 'Last night''s backup job exited with an error.', 'pending', 'high', 4, 'ops@corp.example', 'database'),
  (4, 'VPN drops every hour', 'My VPN connection drops each hour.', 'open', 'normal', NULL, 'kim@corp.example', 'network'),
  (5, 'Password reset loop', 'The reset link sends me back to the reset page.', 'closed', 'normal', 7, 'leo@corp.example', 'desktop'),
  (6, 'Printer driver missing on new laptop', 'Cannot print from the new laptop.', 'open', 'low', NULL, 'judy@corp.example', 'desktop'),
  (7, 'Slow queries on reporting DB', 'Monthly report takes 40 minutes.', 'open', 'normal', 3, 'ana@corp.example', 'database'),
  (8, 'Wi-Fi weak in meeting room B', 'Signal drops during calls.', 'open', 'low', 8, 'ivan@corp.example', 'network'),
  (9, 'Switch port 12 flapping', 'Port goes up and down every few minutes.', 'pending', 'high', 8, 'ops@corp.example', 'network'),
  (10, 'Firewall rule request for CI', 'CI runners need outbound 443 to the artifact store.', 'open', 'normal', 8, 'dev@corp.example', 'network'),
  (11, 'Replace broken monitor', 'Monitor flickers and went black.', 'closed', 'low', 6, 'max@corp.example', 'desktop'),
  (12, 'Printer toner empty', 'Floor 2 printer needs toner.', 'closed', 'low', 6, 'judy@corp.example', 'desktop'),
  (13, 'WIN DISCOUNT PILLS', 'Click here now.', 'open', 'low', NULL, 'spam@promo.example', 'desktop'),
  (14, 'Cheap watches!!!', 'Best prices.', 'open', 'low', NULL, 'spam@promo.example', 'network'),
  (15, 'Schema migration review', 'Please review migration 0042 before Friday.', 'open', 'normal', 3, 'dev@corp.example', 'database'),
  (16, 'Email bounces from partner', 'Mail to the partner domain bounces with 550.', 'open', 'high', 1, 'nina@corp.example', 'network'),
  (17, 'Laptop will not boot', 'Black screen after the update.', 'pending', 'urgent', 7, 'owen@corp.example', 'desktop'),
  (18, 'Re: your invoice', 'See attachment.', 'open', 'low', NULL, 'spam@promo.example', 'database'),
  (19, 'Partnership inquiry', 'We would like to discuss a partnership.', 'open', 'low', NULL, 'partner@promo.example', 'network'),
  (20, 'Network outage in building C', 'No network in building C since 9am.', 'closed', 'urgent', 8, 'ops@corp.example', 'network');
INSERT INTO tags VALUES
  (1, 'vpn'), (2, 'printer'), (2, 'hardware'), (3, 'backup'), (3, 'bug'), (4, 'vpn'), (5, 'account'),
  (6, 'printer'), (7, 'performance'), (7, 'bug'), (8, 'wifi'), (9, 'hardware'), (11, 'hardware'),
  (12, 'printer'), (15, 'bug'), (16, 'email'), (16, 'bug'), (17, 'hardware'), (20, 'outage');
INSERT INTO comments (id, ticket_id, author, body) VALUES
  (1, 1, 'bob', 'Looking into the VPN concentrator logs.'),
  (2, 3, 'dan', 'Disk full on the backup host.'),
  (3, 5, 'grace', 'Cache cleared, works now.'),
  (4, 9, 'mallory', 'Ordered a replacement cable.'),
  (5, 20, 'mallory', 'Power restored, closing.');

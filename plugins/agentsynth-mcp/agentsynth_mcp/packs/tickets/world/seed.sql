-- The ticketing service's starting state. Every episode gets a fresh copy.
CREATE TABLE users (
    name TEXT PRIMARY KEY,
    team TEXT NOT NULL,
    oncall INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE tickets (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    title TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'in_progress', 'closed')),
    priority TEXT NOT NULL DEFAULT 'medium' CHECK (priority IN ('low', 'medium', 'high', 'urgent')),
    assignee TEXT REFERENCES users(name),
    resolution TEXT
);
CREATE TABLE comments (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ticket_id INTEGER NOT NULL REFERENCES tickets(id),
    author TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE TABLE labels (
    ticket_id INTEGER NOT NULL REFERENCES tickets(id),
    label TEXT NOT NULL,
    PRIMARY KEY (ticket_id, label)
);

INSERT INTO users (name, team, oncall) VALUES
    ('alice', 'network', 0),
    ('bob', 'apps', 0),
    ('carol', 'database', 0),
    ('dave', 'platform', 1);

INSERT INTO tickets (id, title, description, status, priority, assignee, resolution) VALUES
    (1, 'Laptop will not boot', 'Black screen after the BIOS logo on a ThinkPad.', 'open', 'medium', 'bob', NULL),
    (2, 'VPN disconnects every 10 minutes', 'Remote staff lose the VPN tunnel; reconnecting works for a while.', 'in_progress', 'high', 'alice', NULL),
    (3, 'Password reset email never arrives', 'Users who reset their password get no email.', 'open', 'high', NULL, NULL),
    (4, 'Nightly database backup failed', 'The backup job exited with code 1 at 01:00.', 'open', 'high', 'carol', NULL),
    (5, 'Wi-Fi slow in meeting room B', 'Speed tests show 2 Mbit/s.', 'closed', 'low', 'alice', 'fixed'),
    (6, 'Checkout page returns 500', 'Customers cannot pay; errors started after the last deploy.', 'open', 'medium', 'bob', NULL),
    (7, 'Add dark mode to the intranet', 'Feature request from the design team.', 'open', 'low', NULL, NULL),
    (8, 'Backup job error at 01:00', 'Same failure as the database backup ticket.', 'open', 'medium', NULL, NULL),
    (9, 'Shared drive password policy too weak', 'Passwords of 6 characters are accepted.', 'open', 'high', NULL, NULL),
    (10, 'Slow queries on the reporting replica', 'Dashboards time out after 30 s.', 'in_progress', 'medium', 'carol', NULL),
    (11, 'Printer drivers missing on new laptops', 'IT image lacks the floor 2 printer driver.', 'open', 'low', 'bob', NULL);

INSERT INTO comments (ticket_id, author, body) VALUES
    (2, 'alice', 'Collecting logs from affected users.'),
    (4, 'carol', 'Disk was full on the backup host.');

INSERT INTO labels (ticket_id, label) VALUES
    (2, 'network'),
    (5, 'network');

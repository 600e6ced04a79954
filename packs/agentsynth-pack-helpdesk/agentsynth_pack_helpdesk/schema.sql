CREATE TABLE agents (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, team TEXT NOT NULL);
CREATE TABLE tickets (
    id INTEGER PRIMARY KEY, subject TEXT NOT NULL, status TEXT NOT NULL CHECK (status IN ('open', 'pending', 'closed')),
    priority TEXT NOT NULL CHECK (priority IN ('low', 'normal', 'high')), agent_id INTEGER REFERENCES agents(id)
);
INSERT INTO agents VALUES (1, 'Ana', 'billing'), (2, 'Bo', 'tech'), (3, 'Cy', 'tech');
INSERT INTO tickets VALUES
  (101, 'Refund not received', 'open', 'high', 1),
  (102, 'Cannot log in', 'open', 'normal', NULL),
  (103, 'Invoice address wrong', 'pending', 'low', 1),
  (104, 'App crashes on start', 'open', 'high', 2),
  (105, 'Password reset mail missing', 'closed', 'normal', 3),
  (106, 'Export to CSV fails', 'open', 'low', NULL);

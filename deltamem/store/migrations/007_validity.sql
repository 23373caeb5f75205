-- When a memory stopped holding, and the memory that says so: written when a later
-- session's fact ends or takes it back ("left Northwind Bank" for "works at Northwind
-- Bank"). An outdated memory leaves search, get_all and what `answer` reads; get and
-- history keep it. invalid_at is the event time of the session that outdated it.
ALTER TABLE memories ADD COLUMN invalid_at TEXT;
ALTER TABLE memories ADD COLUMN superseded_by TEXT;
-- ... and the history row that records it (op 'invalidate'): SQLite changes a CHECK
-- only by copying the table
CREATE TABLE history_new (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    memory_id    TEXT NOT NULL,
    user_id      TEXT NOT NULL,
    op           TEXT NOT NULL CHECK (op IN ('add', 'update', 'delete', 'invalidate')),
    old_content  TEXT,
    new_content  TEXT,
    session_id   TEXT,
    actor        TEXT NOT NULL,
    at           TEXT NOT NULL
);
INSERT INTO history_new SELECT id, memory_id, user_id, op, old_content, new_content, session_id, actor, at FROM history;
DROP TABLE history;
ALTER TABLE history_new RENAME TO history;
CREATE INDEX history_memory ON history (memory_id, id);
CREATE INDEX history_session ON history (user_id, session_id)

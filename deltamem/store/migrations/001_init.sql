-- The session log: raw sessions, written before any extraction runs. The memory
-- bank below is derived from it and can be rebuilt by replaying it.
CREATE TABLE sessions (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id      TEXT NOT NULL,
    agent_id     TEXT NOT NULL DEFAULT '',
    session_id   TEXT NOT NULL,
    ts           REAL NOT NULL,
    timestamp    TEXT NOT NULL,
    messages     TEXT NOT NULL,          -- JSON list of {role, content, timestamp, name}
    content_hash TEXT NOT NULL,
    status       TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'applied', 'failed')),
    error        TEXT,
    attempts     INTEGER NOT NULL DEFAULT 0,
    operations   TEXT,                   -- JSON list of the operations applied, once applied
    created_at   TEXT NOT NULL,
    applied_at   TEXT,
    UNIQUE (user_id, agent_id, session_id)
);
CREATE INDEX sessions_status ON sessions (status, seq);

CREATE TABLE memories (
    rowid        INTEGER PRIMARY KEY,
    id           TEXT NOT NULL UNIQUE,
    user_id      TEXT NOT NULL,
    agent_id     TEXT NOT NULL DEFAULT '',
    content      TEXT NOT NULL,
    ts           REAL NOT NULL,
    timestamp    TEXT NOT NULL,
    memory_type  TEXT NOT NULL DEFAULT '',
    keywords     TEXT NOT NULL DEFAULT '[]',
    session_id   TEXT,
    turns        TEXT NOT NULL DEFAULT '[]',
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL,
    version      INTEGER NOT NULL DEFAULT 1,
    embedding    BLOB NOT NULL           -- float32, unit length
);
CREATE INDEX memories_scope ON memories (user_id, agent_id, ts);

-- Bumped by every write to a user's bank, so that a process holding that user's
-- vectors in memory can tell with one lookup whether they are still current.
CREATE TABLE bank_versions (user_id TEXT PRIMARY KEY, version INTEGER NOT NULL);

-- Every change to a memory, including application-made deletes.
CREATE TABLE history (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    memory_id    TEXT NOT NULL,
    user_id      TEXT NOT NULL,
    op           TEXT NOT NULL CHECK (op IN ('add', 'update', 'delete')),
    old_content  TEXT,
    new_content  TEXT,
    session_id   TEXT,
    actor        TEXT NOT NULL,
    at           TEXT NOT NULL
);
CREATE INDEX history_memory ON history (memory_id, id);
CREATE INDEX history_session ON history (user_id, session_id);

CREATE VIRTUAL TABLE memories_fts USING fts5 (content, keywords, tokenize = 'porter unicode61');
-- Document frequency per (stemmed) term, to leave out terms too common to rank cheaply.
CREATE VIRTUAL TABLE memories_fts_vocab USING fts5vocab (memories_fts, 'row');

-- Every LLM call: purpose, tokens, seconds (like `llm logs`).
CREATE TABLE llm_calls (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    at                TEXT NOT NULL,
    model             TEXT NOT NULL,
    purpose           TEXT NOT NULL,
    prompt_tokens     INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    cached_tokens     INTEGER NOT NULL,
    seconds           REAL NOT NULL,
    ok                INTEGER NOT NULL,
    error             TEXT
);

CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

-- The second tier: every turn of the session log, indexed for search beside the
-- facts (embedding + keyword index, no LLM). A session's turns are written in the
-- same transaction as its log entry; `indexed` marks the sessions whose turns are
-- in, so a store from before this migration is indexed once on open.
ALTER TABLE sessions ADD COLUMN indexed INTEGER NOT NULL DEFAULT 0;
CREATE INDEX sessions_unindexed ON sessions (indexed, seq);

CREATE TABLE episodes (
    rowid        INTEGER PRIMARY KEY,
    id           TEXT NOT NULL UNIQUE,
    user_id      TEXT NOT NULL,
    agent_id     TEXT NOT NULL DEFAULT '',
    session_id   TEXT NOT NULL,
    turn         INTEGER NOT NULL,       -- index of the message in its session
    role         TEXT NOT NULL,
    name         TEXT,
    content      TEXT NOT NULL,
    ts           REAL NOT NULL,
    timestamp    TEXT NOT NULL,
    embedding    BLOB NOT NULL,          -- float32, unit length
    UNIQUE (user_id, agent_id, session_id, turn)
);
CREATE INDEX episodes_scope ON episodes (user_id, agent_id, ts);
CREATE VIRTUAL TABLE episodes_fts USING fts5 (content, tokenize = 'porter unicode61');
CREATE VIRTUAL TABLE episodes_fts_vocab USING fts5vocab (episodes_fts, 'row');

-- Bumped when a user's episodes change (see bank_versions).
CREATE TABLE episode_versions (user_id TEXT PRIMARY KEY, version INTEGER NOT NULL)

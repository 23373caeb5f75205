-- deltamem on PostgreSQL + pgvector: the same tables as the SQLite store.
-- Applied once, in one transaction, by PostgresStore on first connect; the
-- embedding column gets its dimension (vector(dim)) right after, from meta.
CREATE EXTENSION IF NOT EXISTS vector;

-- Full-text config: English stemming (like FTS5's porter) and no stop words (like
-- FTS5's unicode61), so a term the SQLite store finds is found here too.
CREATE TEXT SEARCH DICTIONARY deltamem_stem (TEMPLATE = snowball, Language = english);
CREATE TEXT SEARCH CONFIGURATION deltamem_fts (COPY = english);
ALTER TEXT SEARCH CONFIGURATION deltamem_fts
    ALTER MAPPING FOR asciiword, asciihword, hword_asciipart, word, hword, hword_part
    WITH deltamem_stem;

-- The session log: raw sessions, written before any extraction runs. The memory
-- bank below is derived from it and can be rebuilt by replaying it.
CREATE TABLE sessions (
    seq          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,  -- arrival order
    user_id      text NOT NULL,
    agent_id     text NOT NULL DEFAULT '',
    session_id   text NOT NULL,
    ts           double precision NOT NULL,  -- epoch seconds of `timestamp`
    timestamp    text NOT NULL,              -- ISO 8601 as given (keeps its zone)
    messages     text NOT NULL,              -- JSON list of {role, content, timestamp, name}
    content_hash text NOT NULL,
    status       text NOT NULL DEFAULT 'pending'
                 CHECK (status IN ('pending', 'applied', 'failed')),
    error        text,
    attempts     integer NOT NULL DEFAULT 0,
    operations   jsonb,                      -- the operations applied, once applied
    created_at   timestamptz NOT NULL,
    applied_at   timestamptz,
    UNIQUE (user_id, agent_id, session_id)
);
CREATE INDEX sessions_status ON sessions (status, seq);

-- The memory bank. `id` is the stable public id; `seq` is insertion order, the
-- tie-break wherever SQLite uses its rowid. Vectors and the keyword index live on
-- the row itself: KNN within a scope uses the btree on (user_id, agent_id, ts)
-- and is exact (no HNSW: it filters after the search and loses per-user recall).
CREATE TABLE memories (
    id           text PRIMARY KEY,
    seq          bigint GENERATED ALWAYS AS IDENTITY,
    user_id      text NOT NULL,
    agent_id     text NOT NULL DEFAULT '',
    content      text NOT NULL,
    ts           double precision NOT NULL,
    timestamp    text NOT NULL,
    memory_type  text NOT NULL DEFAULT '',
    keywords     jsonb NOT NULL DEFAULT '[]',
    session_id   text,
    turns        jsonb NOT NULL DEFAULT '[]',
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL,
    version      integer NOT NULL DEFAULT 1,
    embedding    vector NOT NULL,
    fts_text     text NOT NULL,  -- content and keywords, diacritics folded (as FTS5's unicode61)
    tsv          tsvector GENERATED ALWAYS AS (to_tsvector('deltamem_fts', fts_text)) STORED
);
CREATE INDEX memories_scope ON memories (user_id, agent_id, ts);
CREATE INDEX memories_tsv ON memories USING gin (tsv);

-- Every change to a memory, including application-made deletes.
CREATE TABLE history (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    memory_id    text NOT NULL,
    user_id      text NOT NULL,
    op           text NOT NULL CHECK (op IN ('add', 'update', 'delete')),
    old_content  text,
    new_content  text,
    session_id   text,
    actor        text NOT NULL,
    at           timestamptz NOT NULL
);
CREATE INDEX history_memory ON history (memory_id, id);
CREATE INDEX history_session ON history (session_id, id);
CREATE INDEX history_user ON history (user_id);

-- Every LLM call: purpose, tokens, seconds (like `llm logs`).
CREATE TABLE llm_calls (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at                timestamptz NOT NULL,
    model             text NOT NULL,
    purpose           text NOT NULL,
    prompt_tokens     integer NOT NULL,
    completion_tokens integer NOT NULL,
    cached_tokens     integer NOT NULL,
    seconds           double precision NOT NULL,
    ok                boolean NOT NULL,
    error             text
);

CREATE TABLE meta (key text PRIMARY KEY, value text NOT NULL);

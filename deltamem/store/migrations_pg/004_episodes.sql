-- The second tier: every turn of the session log, indexed for search beside the
-- facts (see the SQLite migration of the same number). Exact KNN through the
-- btree on the scope, full text through a GIN index, as for memories.
ALTER TABLE sessions ADD COLUMN indexed boolean NOT NULL DEFAULT false;
CREATE INDEX sessions_unindexed ON sessions (seq) WHERE NOT indexed;

CREATE TABLE episodes (
    id           text PRIMARY KEY,
    seq          bigint GENERATED ALWAYS AS IDENTITY,
    user_id      text NOT NULL,
    agent_id     text NOT NULL DEFAULT '',
    session_id   text NOT NULL,
    turn         integer NOT NULL,
    role         text NOT NULL,
    name         text,
    content      text NOT NULL,
    ts           double precision NOT NULL,
    timestamp    text NOT NULL,
    embedding    vector NOT NULL,
    fts_text     text NOT NULL,
    tsv          tsvector GENERATED ALWAYS AS (to_tsvector('deltamem_fts', fts_text)) STORED,
    UNIQUE (user_id, agent_id, session_id, turn)
);
CREATE INDEX episodes_scope ON episodes (user_id, agent_id, ts);
CREATE INDEX episodes_tsv ON episodes USING gin (tsv);

-- When a memory stops being served, and the expiry a session gives the memories
-- derived from it (see the SQLite migration 008_expiry.sql).
ALTER TABLE memories ADD COLUMN expires_at timestamptz;
ALTER TABLE sessions ADD COLUMN expires_at timestamptz;
CREATE INDEX memories_expiry ON memories (expires_at) WHERE expires_at IS NOT NULL;

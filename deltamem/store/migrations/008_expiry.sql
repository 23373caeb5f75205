-- When a memory stops being served (deltamem/expiry.py): set by hand, with the
-- session it came from, or by a TTL of its type. An expired memory leaves search,
-- get_all and what `answer` reads, as an outdated one does; get and history keep it
-- until a sweep (`Memory.sweep_expired`) deletes it. ISO 8601 in UTC with
-- microseconds, so that the text compares as the instant does.
ALTER TABLE memories ADD COLUMN expires_at TEXT;
-- the expiry a session gives the memories derived from it (added with infer=False,
-- they are derived later, maybe by another process)
ALTER TABLE sessions ADD COLUMN expires_at TEXT;
CREATE INDEX memories_expiry ON memories (expires_at) WHERE expires_at IS NOT NULL

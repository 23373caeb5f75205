-- Sessions added with infer=False (see the SQLite migration of the same number):
-- a pending row with `deferred` set, reported as status "deferred".
ALTER TABLE sessions ADD COLUMN deferred boolean NOT NULL DEFAULT false;

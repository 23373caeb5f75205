-- Leases on users (see the SQLite migration of the same number). Expiry is compared
-- with the database's clock, so worker machines need not agree on the time.
CREATE TABLE user_leases (
    user_id    text PRIMARY KEY,
    owner      text NOT NULL,
    expires_at double precision NOT NULL  -- unix seconds, database clock
);

-- Leases on users: the worker holding a user's lease is the only one planning that
-- user's sessions, so several worker processes sharing one log neither spend LLM
-- work twice nor apply a user's sessions out of order. A lease expires unless its
-- holder renews it (a crashed worker's users are free again after `expires_at`).
CREATE TABLE user_leases (
    user_id    TEXT PRIMARY KEY,
    owner      TEXT NOT NULL,
    expires_at REAL NOT NULL             -- unix seconds
)

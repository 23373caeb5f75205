-- Per-user version of each searched table (memories, episodes), for the banks that
-- search caches in each process (store/postgres_search.py): every write that
-- changes a user's rows of a table bumps it in the same transaction, and a search
-- reads it to know whether its bank is stale. A user without a row is at 0.
CREATE TABLE search_versions (
    user_id  text NOT NULL,
    tier     text NOT NULL CHECK (tier IN ('memories', 'episodes')),
    version  bigint NOT NULL,
    PRIMARY KEY (user_id, tier)
);

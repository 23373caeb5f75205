-- The model's raw reply to each call (see the SQLite migration of the same number).
ALTER TABLE llm_calls ADD COLUMN reply text;

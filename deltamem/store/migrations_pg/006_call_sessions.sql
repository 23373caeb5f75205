-- The session each LLM call worked for (see the SQLite migration of the same number).
ALTER TABLE llm_calls ADD COLUMN user_id text;
ALTER TABLE llm_calls ADD COLUMN agent_id text;
ALTER TABLE llm_calls ADD COLUMN session_id text;
CREATE INDEX llm_calls_session ON llm_calls (user_id, session_id, id);

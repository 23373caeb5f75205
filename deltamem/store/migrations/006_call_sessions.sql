-- The session each LLM call worked for (NULL outside a session: answers, judges), so
-- that a session's calls can be read back (the inspector's session page). A person's
-- edit of a memory is a history row with actor 'person' and no session.
ALTER TABLE llm_calls ADD COLUMN user_id TEXT;
ALTER TABLE llm_calls ADD COLUMN agent_id TEXT;
ALTER TABLE llm_calls ADD COLUMN session_id TEXT;
CREATE INDEX llm_calls_session ON llm_calls (user_id, session_id, id)

-- The model's raw reply to each call, before parsing or repair: what the agent
-- actually proposed, in order, including what validation later refused.
ALTER TABLE llm_calls ADD COLUMN reply TEXT

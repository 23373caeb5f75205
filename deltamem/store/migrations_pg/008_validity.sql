-- When a memory stopped holding, and the memory that says so (see the SQLite
-- migration 007_validity.sql), and the history row that records it.
ALTER TABLE memories ADD COLUMN invalid_at text;
ALTER TABLE memories ADD COLUMN superseded_by text;
ALTER TABLE history DROP CONSTRAINT history_op_check;
ALTER TABLE history ADD CONSTRAINT history_op_check
    CHECK (op IN ('add', 'update', 'delete', 'invalidate'));

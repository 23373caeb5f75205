"""LLM judges. Each judge is a rubric (system message, shared by every item so an
engine's prompt cache can reuse it) and an item template whose varying part
comes last; outputs are schema-constrained JSON and cached by content hash."""

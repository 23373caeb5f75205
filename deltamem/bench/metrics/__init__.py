"""Metrics: pure functions from logged records to numbers (fractions 0–1, None
where the judge that would give a number was skipped)."""

"""The evaluation harness (SPEC §4).

Layers, each a small module: `datasets` read benchmark files unchanged into
pydantic models and deltamem message lists; `systems` put any memory system
behind one interface; runners (`halumem`) drive a system through a benchmark and
log every evaluated item to `results.jsonl` as they go; `metrics` turn those
records into numbers; `cli` exposes it as `deltamem bench ...`.
"""

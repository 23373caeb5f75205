"""Training kit: the memory-state distance and reward (SPEC §5)."""

"""Benchmark loaders. Each reads the official files unchanged and converts dialogue
into deltamem messages plus a map from message index to the dataset's turn id."""

from deltamem.bench.datasets.base import BenchSession, safe_time

__all__ = ["BenchSession", "safe_time"]

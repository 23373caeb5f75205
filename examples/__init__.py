"""Runnable examples. A package, so that `--systems examples.custom_system:KeywordMemory`
imports this directory's module from the project root (pysbd installs a top-level
`examples` package of its own, which would otherwise be found first)."""

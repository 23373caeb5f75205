"""The store port and its backends."""

from deltamem.store.base import (
    PlannedWrite,
    SessionConflict,
    Store,
    StoreError,
    UnknownMemory,
)

__all__ = ["PlannedWrite", "SessionConflict", "Store", "StoreError", "UnknownMemory"]

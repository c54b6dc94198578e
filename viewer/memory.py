"""Keep the loader's resident memory close to what its tables hold: Arrow on malloc, freed pages handed back."""
from __future__ import annotations

import ctypes
import os

import pyarrow as pa

_trim = None


def use_system_allocator() -> None:
    """Make Arrow allocate through malloc (unless ARROW_DEFAULT_MEMORY_POOL chooses otherwise)."""
    if os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        return
    pa.set_memory_pool(pa.system_memory_pool())


def release() -> None:
    """Return freed memory to the operating system (Arrow's pool, then glibc's heap)."""
    global _trim
    pa.default_memory_pool().release_unused()
    if _trim is None:
        try:
            _trim = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):   # not glibc
            _trim = False
    if _trim:
        _trim(0)

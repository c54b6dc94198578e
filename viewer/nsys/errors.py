"""The one error type of the Nsight overlay (a one-line message naming the file)."""
from __future__ import annotations

from viewer.errors import TraceError


class NsysError(TraceError):
    """An Nsight Systems export that cannot be used: not SQLite, or missing a table it needs."""

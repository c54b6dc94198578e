"""Read a ringscope trace file back, repairing one cut short by a crash.

A file written by :mod:`tracer.tracefile` is complete JSON after every flush. A process killed in
the middle of a write leaves whole event lines followed by part of one line and no closing tail;
:func:`read_trace` then keeps every complete line and closes the array. Only ``json`` is imported.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from tracer.vocab import VERSION_KEY


class TraceReadError(ValueError):
    """The file is not a trace that can be read or repaired (one-line message)."""


@dataclass
class TraceData:
    meta: dict
    events: list = field(default_factory=list)
    repaired: bool = False      # True when the file was cut short and its tail rebuilt
    other: dict = field(default_factory=dict)


def repair_text(text: str) -> str:
    """Close a cut-short trace: drop the partial last line and trailing comma, add ``]}``."""
    cut = text.rfind("\n")
    body = text[:cut] if cut >= 0 else ""
    body = body.rstrip().rstrip(",")
    if "[" not in body:
        return ""
    return body + ("\n]}" if body.lstrip().startswith("{") else "\n]")


def read_trace(path) -> TraceData:
    """Load one rank's trace (object or array form), repairing a truncated file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise TraceReadError(f"{p}: cannot read: {e.strerror or e}") from None
    repaired = False
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        fixed = repair_text(text)
        try:
            doc = json.loads(fixed) if fixed else None
        except json.JSONDecodeError as e:
            raise TraceReadError(f"{p}: not a Chrome trace and not repairable "
                                 f"(line {e.lineno}: {e.msg})") from None
        if doc is None:
            raise TraceReadError(f"{p}: empty or cut before its first event") from None
        repaired = True
    if isinstance(doc, list):
        return TraceData(meta={}, events=doc, repaired=repaired)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TraceReadError(f"{p}: no traceEvents list")
    other = doc.get("otherData") or {}
    return TraceData(meta=dict(other.get(VERSION_KEY) or {}), events=doc["traceEvents"],
                     repaired=repaired, other=other)

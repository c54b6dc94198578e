"""Every analysis of a run declared once (``viewer/catalog.py``): what the run must have for it, how it goes
into ``summarize --json`` and ``--csv``, how it prints and shows; ``viewer.Run`` computes them."""
from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from viewer.schema import RunTables

# what a run can have, in the words that say what an analysis needs when the run lacks it
NEEDS = {
    "runtime": "a Horovod-style runtime's trace (ringscope's, or a Horovod timeline)",
    "ringscope": "a trace of ringscope's own runtime",
    "ddp": "a watched torch.distributed job's trace (DDP or FSDP: hvd.timeline.watch)",
    "negotiation": "when each rank was ready: two or more ranks' runtime traces, or the coordinator's ticks",
    "collectives": "collectives in the trace",
    "wire": "collectives across two or more ranks",
    "steps": "step marks (STEP spans, or torch.profiler's ProfilerStep#N)",
    "hosts": "ranks on two or more hosts",
    "elastic": "an elastic run (elastic.json and its generations)",
    "cycles": "the engine's cycle marks",
    "kineto": "a torch.profiler (Kineto) trace",
}


@dataclass(frozen=True)
class Column:
    """A column as people see it; ``varies``: shown only when its values differ; ``unknown``: a missing value."""
    key: str
    label: str
    unit: str | Callable[[Any], str] = "text"
    varies: bool = False
    unknown: str | None = None


@dataclass(frozen=True)
class Table:
    """How an analysis prints and shows: ``last`` rows, shown columns ``derive``d, a ``note`` per row."""
    title: str
    columns: tuple[Column, ...]
    last: bool = False
    derive: Callable[[Any], Any] | None = None
    note: Callable[[Any], str] | None = None


@dataclass(frozen=True)
class Analysis:
    name: str                          # Run.<name>(), its CSV file, its JSON key unless ``key`` says
    compute: Callable[..., Any]        # (run, **params) -> DataFrame or dict
    needs: frozenset[str]
    rows: Callable[[Any], Any] | None  # the result as the rows shown, written and summarized (None: itself)
    json: str | Callable | None        # "rows", "top" (--top N of them), "first" (row), "object" (the
    #                                    result as it is), (rows, top) -> value; None: not in the summary
    key: str                           # its place in the summary; "kineto.steps" nests
    tables: tuple[Table, ...]
    params: tuple[str, ...]            # the keyword parameters it takes (e.g. peak_busbw_gbps)


ANALYSES: dict[str, Analysis] = {}


def declare(name: str, compute: Callable, *, needs: tuple[str, ...] = (), rows: Callable | None = None,
            json: str | Callable | None = None, key: str | None = None, table: Table | tuple[Table, ...] = ()):
    """Declare ``compute(run, **params)`` as the analysis ``name``."""
    if set(needs) - set(NEEDS):
        raise ValueError(f"unknown needs: {set(needs) - set(NEEDS)}")
    ANALYSES[name] = Analysis(name, compute, frozenset(needs), rows, json, key or name,
                              table if isinstance(table, tuple) else (table,),
                              tuple(inspect.signature(compute).parameters)[1:])
    return compute


def analysis(**declared):
    """Declare the decorated ``f(run, **params)`` as the analysis of its name (see :func:`declare`)."""
    return lambda fn: declare(fn.__name__, fn, **declared)


def capabilities(tables: RunTables, has_steps: bool) -> frozenset[str]:
    """What a run has, among :data:`NEEDS`."""
    formats = {str(f) for f in tables.ranks["format"].dropna()}
    has = {"steps"} if has_steps else set()
    if "ringscope" in formats:
        has |= {"ringscope", "runtime"}
    if formats & {"ddp", "fsdp"}:   # its collectives are the runtime's fused ops; its settings are torch's
        has |= {"ddp", "runtime"}
    if any(f.startswith("horovod") for f in formats):
        has.add("runtime")
    if "kineto" in formats or "launch_ns" in tables.events_without_ops.columns:
        has.add("kineto")
    ops = tables.tensor_ops
    if "runtime" in has and (len(tables.readiness) or (len(ops) and ops["rank"].nunique() >= 2)):
        has.add("negotiation")
    fo = tables.fused_ops
    if len(fo):
        has.add("collectives")
        if (fo["size"].where(fo["size"] > 0, int(tables.meta.get("size") or 1)) >= 2).any():
            has.add("wire")
    if tables.ranks["host"].dropna().nunique() >= 2:
        has.add("hosts")
    if tables.meta.get("elastic"):
        has.add("elastic")
    if len(tables.cycles):
        has.add("cycles")
    return frozenset(has)

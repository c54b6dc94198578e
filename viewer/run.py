"""``viewer.Run``: the notebook façade over one loaded run.

    run = Run.load("runs/demo")          # a run directory, one trace file, or a list of files
    run.tensor_ops                       # schema tables as DataFrames
    run.stragglers()                     # analyses, each a DataFrame
    run.findings()                       # recommendations, one sentence each
"""
from __future__ import annotations

import functools
import inspect
from pathlib import Path

from viewer.schema import RunTables


def _memo(method):
    """Compute an analysis once per Run and arguments (tables do not change after loading); ``f()``,
    ``f(None)`` and ``f(x=None)`` are one call."""
    sig = inspect.signature(method)

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        bound = sig.bind(self, *args, **kwargs)
        bound.apply_defaults()
        key = (method.__name__, tuple(bound.arguments.items())[1:])
        if key not in self._memo:
            self._memo[key] = method(self, *args, **kwargs)
        return self._memo[key]
    return wrapper


class Run:
    """One loaded run: its tables (:class:`viewer.schema.RunTables`) and the analyses over them."""

    def __init__(self, tables: RunTables, source=None):
        self.tables = tables
        self.source = source
        self._memo = {}

    @classmethod
    def load(cls, path, cache: bool = True, cache_dir=None, progress=None) -> Run:
        """Load a run directory, a trace file or a list of trace files (ringscope or Horovod)."""
        from viewer.loader import load_run

        return cls(load_run(path, use_cache=cache, cache_dir=cache_dir, progress=progress), source=path)

    # ---- tables ---------------------------------------------------------------------------
    events = property(lambda self: self.tables.events)
    tensor_ops = property(lambda self: self.tables.tensor_ops)
    fused_ops = property(lambda self: self.tables.fused_ops)
    readiness = property(lambda self: self.tables.readiness)
    cycles = property(lambda self: self.tables.cycles)
    ranks = property(lambda self: self.tables.ranks)
    meta = property(lambda self: self.tables.meta)

    @property
    def size(self) -> int:
        """Number of ranks in the run (from metadata, else the ranks seen)."""
        return int(self.meta.get("size") or len(self.ranks))

    # ---- analyses -------------------------------------------------------------------------
    @_memo
    def negotiations(self):
        """Per tensor and step: each rank's submit time, the last rank and the wait it imposed."""
        from viewer.analyses import stragglers

        return stragglers.negotiations(self.tables, size=self.size)

    @_memo
    def stragglers(self):
        """Per rank: how often last, total wait imposed, median lateness."""
        from viewer.analyses import stragglers

        return stragglers.rank_stragglers(self.negotiations(), size=self.size)

    @_memo
    def fusion(self):
        """Per fused op: tensors, bytes, fill ratio against the threshold, memcpy share."""
        from viewer.analyses import fusion

        return fusion.fused_op_fill(self.fused_ops, threshold=self.meta.get("fusion_threshold"))

    @_memo
    def tensor_sizes(self):
        """Distribution of tensor sizes (power-of-two buckets)."""
        from viewer.analyses import fusion

        return fusion.tensor_size_histogram(self.tensor_ops)

    @_memo
    def cycle_utilisation(self):
        """Per rank: cycles, busy cycles and the share of cycle time spent executing responses."""
        from viewer.analyses import fusion

        return fusion.cycle_utilisation(self.cycles, self.fused_ops)

    @_memo
    def communication(self, peak_busbw_gbps=None):
        """Per fused op: bytes, time, algbw, busbw, efficiency."""
        from viewer.analyses import communication

        return communication.op_bandwidth(self.fused_ops, size=self.size, peak_busbw_gbps=peak_busbw_gbps)

    @_memo
    def bandwidth_by_size(self, peak_busbw_gbps=None):
        """Bandwidth per message-size bucket (nccl-tests style table)."""
        from viewer.analyses import communication

        return communication.bandwidth_by_size(self.communication(peak_busbw_gbps))

    @_memo
    def alpha_beta(self):
        """Latency + bytes/bandwidth fit per backend."""
        from viewer.analyses import communication

        return communication.alpha_beta_fit(self.communication())

    @_memo
    def breakdown(self):
        """Per rank and step: framework wait, negotiation, queue, memcpy, communication; exposed vs overlapped."""
        from viewer.analyses import breakdown

        return breakdown.step_breakdown(self.tables)

    @_memo
    def hangs(self):
        """Tensors some ranks submitted and others never completed, by missing rank."""
        from viewer.analyses import hangs

        return hangs.incomplete_tensors(self.tables, size=self.size)

    @_memo
    def findings(self, peak_busbw_gbps=None):
        """Recommendations: one row per finding (severity, kind, sentence with numbers and action)."""
        from viewer.analyses import recommendations

        return recommendations.findings(self, peak_busbw_gbps=peak_busbw_gbps)

    def __repr__(self) -> str:
        src = self.source if isinstance(self.source, (str, Path)) else "files"
        return (f"Run({src!s}: {len(self.ranks)} rank file(s), size {self.size}, "
                f"{len(self.events)} events, {len(self.tensor_ops)} tensor ops)")

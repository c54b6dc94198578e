"""``viewer.Run``: the notebook façade over one loaded run.

    run = Run.load("runs/demo")          # a run directory, one trace file, or a list of files
    run.tensor_ops                       # schema tables as DataFrames
    run.stragglers()                     # analyses, each a DataFrame
    run.findings()                       # recommendations, one sentence each
"""
from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeAlias, TypeVar

from viewer import memory
from viewer.schema import RunTables

if TYPE_CHECKING:
    import pandas as pd

P = ParamSpec("P")
R = TypeVar("R")
# what Run.load reads: a run directory, one trace file, or several trace files
RunSource: TypeAlias = "str | Path | Iterable[str | Path]"


def _isna(v: object) -> bool:
    import pandas as pd

    return bool(pd.isna(v))


def _memo(method: Callable[Concatenate[Run, P], R]) -> Callable[Concatenate[Run, P], R]:
    """Compute an analysis once per Run and arguments (tables do not change after loading); ``f()``,
    ``f(None)`` and ``f(x=None)`` are one call."""
    sig = inspect.signature(method)

    @functools.wraps(method)
    def wrapper(self: Run, *args: P.args, **kwargs: P.kwargs) -> R:
        bound = sig.bind(self, *args, **kwargs)
        bound.apply_defaults()
        key = (method.__name__, tuple(bound.arguments.items())[1:])
        if key not in self._memo:
            self._memo[key] = method(self, *args, **kwargs)
            memory.release()   # the analysis's intermediate frames: gone, not kept by the allocator
        return self._memo[key]
    return wrapper


class Run:
    """One loaded run: its tables (:class:`viewer.schema.RunTables`) and the analyses over them."""

    def __init__(self, tables: RunTables, source: RunSource | None = None) -> None:
        self.tables = tables
        self.source = source
        self._memo: dict[tuple[str, tuple[tuple[str, Any], ...]], Any] = {}

    @classmethod
    def load(cls, path: RunSource, cache: bool = True, cache_dir: str | os.PathLike[str] | None = None,
             progress: Callable[[int, int, Path], object] | None = None) -> Run:
        """Load a run directory, a trace file or a list of trace files (ringscope or Horovod)."""
        from viewer.loader import load_run

        return cls(load_run(path, use_cache=cache, cache_dir=cache_dir, progress=progress), source=path)

    # ---- tables ---------------------------------------------------------------------------
    @property
    def events(self) -> pd.DataFrame: return self.tables.events
    @property
    def tensor_ops(self) -> pd.DataFrame: return self.tables.tensor_ops
    @property
    def fused_ops(self) -> pd.DataFrame: return self.tables.fused_ops
    @property
    def readiness(self) -> pd.DataFrame: return self.tables.readiness
    @property
    def cycles(self) -> pd.DataFrame: return self.tables.cycles
    @property
    def ranks(self) -> pd.DataFrame: return self.tables.ranks
    @property
    def meta(self) -> dict[str, Any]: return self.tables.meta

    @property
    def size(self) -> int:
        """Number of ranks in the run (from metadata, else the ranks seen)."""
        return int(self.meta.get("size") or len(self.ranks))

    # ---- analyses -------------------------------------------------------------------------
    @_memo
    def negotiations(self) -> pd.DataFrame:
        """Per tensor and step: each rank's submit time, the last rank and the wait it imposed."""
        from viewer.analyses import stragglers

        return stragglers.negotiations(self.tables, size=self.size)

    @_memo
    def stragglers(self) -> pd.DataFrame:
        """Per rank: how often last, total wait imposed, median lateness."""
        from viewer.analyses import stragglers

        return stragglers.rank_stragglers(self.negotiations(), size=self.size)

    @_memo
    def fusion(self) -> pd.DataFrame:
        """Per fused op: tensors, bytes, fill ratio against the threshold, memcpy share."""
        from viewer.analyses import fusion

        return fusion.fused_op_fill(self.fused_ops, threshold=self.meta.get("fusion_threshold"))

    @_memo
    def tensor_sizes(self) -> pd.DataFrame:
        """Distribution of tensor sizes (power-of-two buckets)."""
        from viewer.analyses import fusion

        return fusion.tensor_size_histogram(self.tensor_ops)

    @_memo
    def cycle_utilisation(self) -> pd.DataFrame:
        """Per rank: cycles, busy cycles and the share of cycle time spent executing responses."""
        from viewer.analyses import fusion

        return fusion.cycle_utilisation(self.cycles, self.fused_ops)

    @_memo
    def communication(self, peak_busbw_gbps: float | None = None) -> pd.DataFrame:
        """Per fused op: bytes, time, algbw, busbw, efficiency."""
        from viewer.analyses import communication

        return communication.op_bandwidth(self.fused_ops, size=self.size, peak_busbw_gbps=peak_busbw_gbps)

    @_memo
    def bandwidth_by_size(self, peak_busbw_gbps: float | None = None) -> pd.DataFrame:
        """Bandwidth per message-size bucket (nccl-tests style table)."""
        from viewer.analyses import communication

        return communication.bandwidth_by_size(self.communication(peak_busbw_gbps))

    @_memo
    def alpha_beta(self) -> pd.DataFrame:
        """Latency + bytes/bandwidth fit per backend."""
        from viewer.analyses import communication

        return communication.alpha_beta_fit(self.communication())

    @_memo
    def breakdown(self) -> pd.DataFrame:
        """Per rank and step: the phases adding up to the step; negotiation, queue, memcpy, communication."""
        from viewer.analyses import breakdown

        return breakdown.step_breakdown(self.tables)

    @_memo
    def late_ranks(self) -> pd.DataFrame:
        """The ranks flagged late (last far more often than chance, costing the others time)."""
        from viewer.analyses import breakdown, stragglers

        by_rank = breakdown.breakdown_by_rank(self.breakdown())
        step_ns = float(by_rank["step_ns"].median()) if len(by_rank) else None
        return stragglers.late_ranks(self.stragglers(), self.size, step_ns)

    @_memo
    def late_hosts(self) -> pd.DataFrame:
        """The hosts whose ranks were late together (and the clock uncertainty of their ranks)."""
        from viewer.analyses import breakdown, links, stragglers

        by_rank = breakdown.breakdown_by_rank(self.breakdown())
        step_ns = float(by_rank["step_ns"].median()) if len(by_rank) else None
        out = stragglers.late_hosts(self.negotiations(), links.hosts_of(self.ranks), step_ns)
        unc = {int(r): int(u) for r, u in zip(self.ranks["rank"], self.ranks["clock_offset_uncertainty_ns"])
               if not _isna(u)}
        out["clock_uncertainty_ns"] = [max((unc[r] for r in rs if r in unc), default=None) for rs in out["ranks"]]
        return out

    @_memo
    def links(self) -> pd.DataFrame:
        """Per collective and link kind (intra-host, cross-host): traffic, time and busbw."""
        from viewer.analyses import links

        return links.link_ops(self.tables)

    @_memo
    def links_by_size(self) -> pd.DataFrame:
        """Intra-host and cross-host traffic and busbw per op size."""
        from viewer.analyses import links

        return links.by_size(self.links())

    @_memo
    def cross_link_cost(self) -> pd.DataFrame:
        """Per rank: time per step the cross-host link carried its collectives and left it waiting."""
        from viewer.analyses import links

        return links.cross_link_cost(self.tables, self.links())

    @_memo
    def root_causes(self) -> pd.DataFrame:
        """Per late rank: the phase that explains its lateness (or none, or phases unknown), and counters;
        per other rank, a phase far longer than the others'."""
        from viewer.analyses import rootcause

        return rootcause.root_causes(self.breakdown(), self.negotiations(), self.late_ranks(), self.events,
                                     self.stragglers())

    @_memo
    def critical_path(self) -> pd.DataFrame:
        """Per step: the chain of phases and collectives across ranks that set the step's length."""
        from viewer.analyses import critical_path

        return critical_path.critical_path(self.tables, self.breakdown())

    @_memo
    def hangs(self) -> pd.DataFrame:
        """Tensors some ranks submitted and others never completed, by missing rank (an elastic run: judged
        against its last world, where a job that hangs stops)."""
        from viewer.analyses import hangs

        elastic = self.meta.get("elastic")
        size = elastic["generations"][-1]["size"] if elastic else self.size
        return hangs.incomplete_tensors(self.tables, size=size)

    @_memo
    def recoveries(self) -> pd.DataFrame:
        """Elastic runs: one row per reset of the world, with its cause and what it cost (docs/ELASTIC.md)."""
        from viewer.analyses import recoveries

        return recoveries.recoveries(self.tables)

    @_memo
    def findings(self, peak_busbw_gbps: float | None = None) -> pd.DataFrame:
        """Recommendations: one row per finding (severity, kind, sentence with numbers and action)."""
        from viewer.analyses import recommendations

        return recommendations.findings(self, peak_busbw_gbps=peak_busbw_gbps)

    def __repr__(self) -> str:
        src = self.source if isinstance(self.source, (str, Path)) else "files"
        return (f"Run({src!s}: {len(self.ranks)} rank file(s), size {self.size}, "
                f"{len(self.events)} events, {len(self.tensor_ops)} tensor ops)")

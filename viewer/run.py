"""``viewer.Run``: the one façade over a loaded run (its tables and every analysis), for notebooks, CLI, dashboard."""
from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from viewer import catalog, memory, registry
from viewer.kineto import catalog as kineto_catalog  # noqa: F401  (declares Kineto's analyses)
from viewer.schema import RunTables

if TYPE_CHECKING:
    import pandas as pd

# what Run.load reads: a run directory, one trace file, or several trace files
RunSource: TypeAlias = "str | Path | Iterable[str | Path]"


class Unavailable(LookupError):
    """An analysis the run cannot have; ``str()`` says which and why, in one line."""


class Run:
    """One loaded run: its tables (:class:`viewer.schema.RunTables`) and every analysis over them."""

    def __init__(self, tables: RunTables, source: RunSource | None = None) -> None:
        self.tables = tables
        self.source = source
        self._memo: dict[tuple[str, tuple[tuple[str, Any], ...]], Any] = {}
        self._shared: dict[Any, Any] = {}

    @classmethod
    def load(cls, path: RunSource, cache: bool = True, cache_dir: str | os.PathLike[str] | None = None,
             progress: Callable[[int, int, Path], object] | None = None) -> Run:
        """Load a run directory, a trace file or a list of trace files (any format ringscope reads)."""
        from viewer.loader import load_run  # the loader pulls in every reader: only when loading

        return cls(load_run(path, use_cache=cache, cache_dir=cache_dir, progress=progress), source=path)

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

    @functools.cached_property
    def has(self) -> frozenset[str]:
        """What the run has, among :data:`viewer.registry.NEEDS`."""
        return registry.capabilities(self.tables, bool(len(self.get("step_times"))))

    @functools.cached_property
    def step_ns(self) -> float | None:
        """The run's step time (ns): the headline's, the median over steps of the mean over ranks."""
        from viewer.headline import median_step_ns

        return median_step_ns(self.get("step_times"))

    def why_not(self, name: str) -> str | None:
        """Why analysis ``name`` cannot run on this run (one phrase), or None when it can."""
        needs = registry.ANALYSES[name].needs
        missing = [n for n in registry.NEEDS if n in needs and n not in self.has] if needs else []
        return f"needs {registry.NEEDS[missing[0]]}" if missing else None

    def get(self, name: str, *args: Any, **params: Any) -> Any:
        """Analysis ``name``, computed once per parameters; :class:`Unavailable` when the run lacks what it needs."""
        a = registry.ANALYSES.get(name)
        if a is None:
            raise AttributeError(f"no analysis named {name!r}")
        reason = self.why_not(name)
        if reason:
            raise Unavailable(f"{name}: {reason}")
        params = {k: v for k, v in {**dict(zip(a.params, args)), **params}.items() if v is not None}
        key = (name, tuple(sorted(params.items())))
        if key not in self._memo:
            self._memo[key] = a.compute(self, **params)
            memory.release()   # the analysis's intermediate frames: gone, not kept by the allocator
        return self._memo[key]

    def shared(self, key: Any, compute: Callable[[], Any]) -> Any:
        """``compute()``, once per run: an intermediate table several analyses read that is no analysis itself."""
        if key not in self._shared:
            self._shared[key] = compute()
        return self._shared[key]

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_") or name not in registry.ANALYSES:
            raise AttributeError(name)
        return functools.partial(self.get, name)

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(registry.ANALYSES))

    def __repr__(self) -> str:
        src = self.source if isinstance(self.source, (str, Path)) else "files"
        return (f"Run({src!s}: {len(self.ranks)} rank file(s), size {self.size}, "
                f"{len(self.events)} events, {len(self.tensor_ops)} tensor ops)")


__all__ = ["Run", "RunSource", "Unavailable", "catalog"]

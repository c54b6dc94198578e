"""The runs the dashboard holds: loaded once through ``viewer.Run.load``, with their derived views
cached. Browsers only ever see run ids. Runs brought in while serving are bounded (count and table
bytes, least recently used first out); an upload's folder goes with its run."""
from __future__ import annotations

import shutil
import threading
import warnings
from collections import OrderedDict
from functools import cached_property
from pathlib import Path

from viewer.schema import RunTables


class LoadError(Exception):
    """A run that cannot be loaded; ``str()`` is one line naming the file and the problem."""


def tables_of(run) -> RunTables:
    """The RunTables behind whatever the façade returns."""
    if isinstance(run, RunTables):
        return run
    tables = getattr(run, "tables", None)
    if isinstance(tables, RunTables):
        return tables
    return RunTables(**{k: getattr(run, k) for k in
                        ("events", "tensor_ops", "fused_ops", "readiness", "cycles", "ranks")},
                     meta=dict(getattr(run, "meta", {}) or {}))


def load_run(path, cache: bool = True):
    """Load one run through the façade; returns (run, warnings as one-liners); raises LoadError.
    ``cache=False``: no parse cache is read or written (an upload is parsed once, then let go)."""
    path = Path(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            run = _load(path, cache)
        except Exception as exc:  # any failure becomes a banner, never a dead app
            msg = " ".join(str(exc).split()) or type(exc).__name__
            if str(path.name) not in msg:
                msg = f"{path}: {msg}"
            raise LoadError(msg) from None
    notes = list(dict.fromkeys(str(w.message) for w in caught))
    if len(tables_of(run).events) == 0:  # nothing to show is an error here, not a blank dashboard
        raise LoadError(notes[0] if notes else f"{path}: no complete events in this trace")
    return run, notes


def _load(path, cache: bool):
    try:
        from viewer import Run
    except ImportError:  # the façade may not exist yet in a partial checkout: use the loader itself
        from viewer.loader import load_run
        return load_run(path, use_cache=cache)
    return Run.load(path, cache=cache)


class RunView:
    """One loaded run plus its derived views (computed on first use, then kept)."""

    def __init__(self, run_id: str, label: str, tables: RunTables, path=None, notes=(), run=None):
        self.id, self.label, self.tables, self.path, self.notes = run_id, label, tables, path, list(notes)
        self._run = run
        self._headline = None
        self.pinned = False   # given at startup: never evicted
        self.owned_dir = None  # an upload's own folder, removed with the run
        self.nbytes = table_bytes(tables)

    @property
    def run(self):
        """The ``viewer.Run`` façade over these tables (for the analyses' findings)."""
        if self._run is None:
            from viewer.run import Run
            self._run = Run(self.tables, source=self.path)
        return self._run

    @cached_property
    def timeline(self):
        from viewer.dashboard.timeline_agg import TimelineIndex
        return TimelineIndex(self.tables.events, self.hosts)

    @cached_property
    def hosts(self) -> dict:
        """``{rank: host}`` where the traces name the host."""
        from viewer.analyses.links import hosts_of
        return hosts_of(self.tables.ranks)

    @cached_property
    def step_spans(self):
        from viewer.dashboard.derive import step_spans
        return step_spans(self.tables)

    @cached_property
    def late(self):
        """Per (tensor, step, rank): ready_ns and late_ns behind the first rank (the analyses' view)."""
        from viewer.dashboard.derive import lateness, lateness_from_negotiations
        try:
            return lateness_from_negotiations(self.run.negotiations())
        except Exception:  # analyses unavailable: the view's own reduction of the same tables
            return lateness(self.tables)

    @cached_property
    def stragglers(self):
        """Per rank: times_last, share_last, wait_imposed_ms, median_late_ms."""
        from viewer.dashboard.derive import stragglers_from_analysis, times_last
        try:
            return stragglers_from_analysis(self.run.stragglers())
        except Exception:
            return times_last(self.late)

    @cached_property
    def comm(self):
        from viewer.dashboard.derive import comm_ops
        return comm_ops(self.tables)

    @cached_property
    def fusion(self):
        from viewer.dashboard.derive import fusion
        return fusion(self.tables)

    def headline(self, peak_gbps=None) -> dict:
        if peak_gbps is None and self._headline is not None:
            return self._headline
        from viewer.dashboard.derive import headline
        h = headline(self.tables, peak_gbps, stragglers=self.stragglers)
        if self.exposed_pct is not None:
            h["exposed_pct"] = self.exposed_pct
        if peak_gbps is None:
            self._headline = h
        return h

    @cached_property
    def exposed_pct(self):
        """Exposed communication as % of step time, from the analyses' per-step breakdown."""
        try:
            return self.run.headline()["exposed_comm_pct"]
        except Exception:  # analyses unavailable: headline() keeps its own estimate
            return None

    @cached_property
    def breakdown_by_rank(self):
        """Mean per step of each breakdown bucket, one row per rank (None when the analyses fail)."""
        try:
            return self.run.breakdown()
        except Exception:  # shown as "nothing to show", never a dead page
            return None

    @cached_property
    def root_causes(self):
        try:
            return self.run.root_cause()
        except Exception:
            return None

    @cached_property
    def critical_path(self):
        try:
            return self.run.critical_path()
        except Exception:
            return None

    @cached_property
    def recoveries(self):
        """An elastic run's resets with their costs (empty for another run; None when the analysis fails)."""
        try:
            return self.run.recoveries()
        except Exception:
            return None

    @cached_property
    def findings(self):
        """The analyses' recommendations (a DataFrame), or the exception that stopped them."""
        try:
            return self.run.findings()
        except Exception as exc:  # shown as a note on the page, never a dead app
            return exc

    def warm(self) -> RunView:
        """Compute every derived view now (before serving), so first views only render."""
        for name in ("timeline", "step_spans", "late", "stragglers", "comm", "fusion", "findings",
                     "exposed_pct"):
            getattr(self, name)
        self.headline()
        return self


def table_bytes(tables: RunTables) -> int:
    """Memory held by a run's tables (the derived views come on top)."""
    total = 0
    for name in ("events", "tensor_ops", "fused_ops", "readiness", "cycles", "ranks"):
        df = getattr(tables, name, None)
        if df is not None:
            total += int(df.memory_usage(index=True, deep=True).sum())
    return total


class Registry:
    """Thread-safe map of run id -> RunView, least recently used last out.

    Runs added with ``pin=True`` (the ones given at startup) stay and do not count; the others are
    evicted, oldest use first, while more than ``max_runs`` of them are held or their tables pass
    ``max_bytes``; the run just added always stays."""

    def __init__(self, max_runs: int = 8, max_bytes: int = 2 << 30):
        self._runs: OrderedDict[str, RunView] = OrderedDict()
        self._lock = threading.Lock()
        self._next = 1
        self.max_runs, self.max_bytes = max_runs, max_bytes
        self.evicted: dict[str, str] = {}   # run id -> label, to say what happened to a gone run

    def add_tables(self, tables: RunTables, label: str, path=None, notes=(), run=None, pin=False,
                   owned_dir=None) -> RunView:
        with self._lock:
            run_id = f"run{self._next}"
            self._next += 1
            view = RunView(run_id, label, tables, path, notes, run)
            view.pinned, view.owned_dir = pin, owned_dir
            self._runs[run_id] = view
            self._evict(keep=run_id)
            return view

    def add_path(self, path, label=None, pin=False, owned_dir=None) -> RunView:
        """Load ``path`` (raises LoadError) and register it; a path already loaded is reused. A run in
        its own ``owned_dir`` (an upload) leaves no parse cache anywhere."""
        path = Path(path).resolve()
        with self._lock:
            for view in self._runs.values():
                if view.path == path:
                    self._runs.move_to_end(view.id)
                    return view
        run, notes = load_run(path, cache=owned_dir is None)
        return self.add_tables(tables_of(run), label or path.name, path, notes, run, pin, owned_dir)

    def get(self, run_id):
        with self._lock:
            view = self._runs.get(run_id)
            if view is not None:
                self._runs.move_to_end(run_id)
            return view

    def _evict(self, keep: str) -> None:
        def over():
            loose = [v for v in self._runs.values() if not v.pinned]
            return len(loose) > self.max_runs or sum(v.nbytes for v in loose) > self.max_bytes

        for run_id in [k for k, v in self._runs.items() if not v.pinned and k != keep]:
            if not over():
                break
            view = self._runs.pop(run_id)
            self.evicted[run_id] = view.label
            if view.owned_dir is not None:
                shutil.rmtree(view.owned_dir, ignore_errors=True)

    def options(self) -> list[dict]:
        with self._lock:
            views = sorted(self._runs.values(), key=lambda v: int(v.id[3:]))
        return [{"label": f"{v.label} ({v.id})", "value": v.id} for v in views]

    def __len__(self):
        return len(self._runs)

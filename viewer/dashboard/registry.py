"""The runs the dashboard holds: loaded once through ``viewer.Run.load``, with their derived views
cached. Browsers only ever see run ids."""
from __future__ import annotations

import threading
import warnings
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


def load_tables(path) -> tuple[RunTables, list[str]]:
    """Load one run (directory or file); returns its tables and any warnings as one-liners."""
    run, notes = load_run(path)
    return tables_of(run), notes


def load_run(path):
    """Load one run through the façade; returns (run, warnings as one-liners); raises LoadError."""
    path = Path(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            run = _load(path)
        except Exception as exc:  # any failure becomes a banner, never a dead app
            msg = " ".join(str(exc).split()) or type(exc).__name__
            if str(path.name) not in msg:
                msg = f"{path}: {msg}"
            raise LoadError(msg) from None
    notes = list(dict.fromkeys(str(w.message) for w in caught))
    if len(tables_of(run).events) == 0:  # nothing to show is an error here, not a blank dashboard
        raise LoadError(notes[0] if notes else f"{path}: no complete events in this trace")
    return run, notes


def _load(path):
    try:
        from viewer import Run
    except ImportError:  # the façade may not exist yet in a partial checkout: use the loader itself
        from viewer.loader import load_run
        return load_run(path)
    return Run.load(path)


class RunView:
    """One loaded run plus its derived views (computed on first use, then kept)."""

    def __init__(self, run_id: str, label: str, tables: RunTables, path=None, notes=(), run=None):
        self.id, self.label, self.tables, self.path, self.notes = run_id, label, tables, path, list(notes)
        self._run = run
        self._headline = None

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
        return TimelineIndex(self.tables.events)

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
            b = self.run.breakdown()
            b = b[b["step"] >= 0]
            return float(100.0 * b["exposed_ns"].sum() / b["step_ns"].sum()) if len(b) else None
        except Exception:  # analyses unavailable: headline() keeps its own estimate
            return None

    @cached_property
    def findings(self):
        """The analyses' recommendations (a DataFrame), or the exception that stopped them."""
        try:
            return self.run.findings()
        except Exception as exc:  # shown as a note on the page, never a dead app
            return exc

    def warm(self) -> "RunView":
        """Compute every derived view now (before serving), so first views only render."""
        for name in ("timeline", "step_spans", "late", "stragglers", "comm", "fusion", "findings",
                     "exposed_pct"):
            getattr(self, name)
        self.headline()
        return self


class Registry:
    """Thread-safe map of run id -> RunView."""

    def __init__(self):
        self._runs: dict[str, RunView] = {}
        self._lock = threading.Lock()

    def add_tables(self, tables: RunTables, label: str, path=None, notes=(), run=None) -> RunView:
        with self._lock:
            run_id = f"run{len(self._runs) + 1}"
            view = RunView(run_id, label, tables, path, notes, run)
            self._runs[run_id] = view
            return view

    def add_path(self, path, label=None) -> RunView:
        """Load ``path`` (raises LoadError) and register it; a path already loaded is reused."""
        path = Path(path).resolve()
        with self._lock:
            for view in self._runs.values():
                if view.path == path:
                    return view
        run, notes = load_run(path)
        return self.add_tables(tables_of(run), label or path.name, path, notes, run)

    def get(self, run_id):
        return self._runs.get(run_id)

    def options(self) -> list[dict]:
        return [{"label": f"{v.label} ({v.id})", "value": v.id} for v in self._runs.values()]

    def __len__(self):
        return len(self._runs)

"""The runs the dashboard holds: each a ``viewer.Run`` (every figure a page shows is one of its analyses)
with what only a store keeps. Browsers only ever see run ids. Runs brought in while serving are bounded
(count and table bytes, least recently used first out); an upload's folder goes with its run."""
from __future__ import annotations

import shutil
import threading
import warnings
from collections import OrderedDict
from functools import cached_property
from pathlib import Path

from viewer import Run
from viewer.analyses.links import hosts_of
from viewer.dashboard import outliers
from viewer.dashboard.timeline_agg import TimelineIndex
from viewer.nsys.attach import attach_nsys, with_gpu_rows
from viewer.nsys.errors import NsysError


class LoadError(Exception):
    """A run that cannot be loaded; ``str()`` is one line naming the file and the problem."""


def load_run(path, cache: bool = True) -> tuple[Run, list[str]]:
    """Load one run; returns (run, warnings as one-liners); raises LoadError.
    ``cache=False``: no parse cache is read or written (an upload is parsed once, then let go)."""
    path = Path(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            run = Run.load(path, cache=cache)
        except Exception as exc:  # whatever a file does to the loader becomes a banner, never a dead app
            msg = " ".join(str(exc).split()) or type(exc).__name__
            raise LoadError(msg if path.name in msg else f"{path}: {msg}") from None
    notes = list(dict.fromkeys(str(w.message) for w in caught))
    if len(run.events) == 0:  # nothing to show is an error here, not a blank dashboard
        raise LoadError(notes[0] if notes else f"{path}: no complete events in this trace")
    return run, notes


class Held:
    """A run in the store, with what only the store keeps: where it came from, its notes and table bytes,
    whether it stays (given at startup), the folder it owns (an upload's), the timeline's index."""

    def __init__(self, run_id: str, label: str, run: Run, path=None, notes=(), pinned=False, owned_dir=None):
        self.id, self.label, self.run, self.path, self.notes = run_id, label, run, path, list(notes)
        self.pinned, self.owned_dir = pinned, owned_dir
        self.nbytes = sum(int(df.memory_usage(index=True, deep=True).sum()) for df in (
            run.events, run.tensor_ops, run.fused_ops, run.readiness, run.cycles, run.ranks))

    @cached_property
    def timeline(self) -> TimelineIndex:
        return TimelineIndex(self.run.events, hosts_of(self.run.ranks), self.run.meta.get("thread_names"))

    @cached_property
    def matrices(self) -> dict:
        """The Overview's rank x step matrices (``outliers.matrices``)."""
        return outliers.matrices(self.run)

    @cached_property
    def outliers(self) -> list[int]:
        """The ranks that stand out, most telling first (``outliers.outlier_ranks``)."""
        return outliers.outlier_ranks(self.run, self.matrices)

    def overlay_nsys(self, specs) -> None:
        """Put the Nsight exports ``specs`` (``FILE`` or ``RANK=FILE``) in as ``gpu:<stream>`` lanes, before
        ``warm()``; the mapping and alignment lines join the notes (the banner)."""
        try:
            ov = attach_nsys(self.run.tables, list(specs))
        except NsysError as exc:
            raise LoadError(" ".join(str(exc).split())) from None
        self.run = Run(with_gpu_rows(self.run.tables, ov), source=self.run.source)
        self.notes += list(ov.warnings) + [f"Nsight overlay: {line}" for line in ov.report_lines()]

    def warm(self) -> Held:
        """Compute what the first views show (the timeline's index, the headline, the outliers) so that they only
        render."""
        _ = self.timeline
        self.run.headline()
        _ = self.outliers
        return self


class Registry:
    """Thread-safe map of run id -> :class:`Held`. Pinned runs (given at startup) stay and do not count; the
    others go, oldest use first, while more than ``max_runs`` or ``max_bytes`` of tables; the newest stays."""

    def __init__(self, max_runs: int = 8, max_bytes: int = 2 << 30):
        self._runs: OrderedDict[str, Held] = OrderedDict()
        self._lock = threading.Lock()
        self._next = 1
        self.max_runs, self.max_bytes = max_runs, max_bytes
        self.evicted: dict[str, str] = {}   # run id -> label, to say what happened to a gone run

    def add(self, run: Run, label: str, path=None, notes=(), pin=False, owned_dir=None) -> Held:
        with self._lock:
            run_id = f"run{self._next}"
            self._next += 1
            self._runs[run_id] = held = Held(run_id, label, run, path, notes, pin, owned_dir)
            self._evict(keep=run_id)
            return held

    def add_path(self, path, label=None, pin=False, owned_dir=None) -> Held:
        """Load ``path`` (raises LoadError) and register it; a path already loaded is reused. A run in
        its own ``owned_dir`` (an upload) leaves no parse cache anywhere."""
        path = Path(path).resolve()
        with self._lock:
            for held in self._runs.values():
                if held.path == path:
                    self._runs.move_to_end(held.id)
                    return held
        run, notes = load_run(path, cache=owned_dir is None)
        return self.add(run, label or path.name, path, notes, pin, owned_dir)

    def get(self, run_id) -> Held | None:
        with self._lock:
            held = self._runs.get(run_id)
            if held is not None:
                self._runs.move_to_end(run_id)
            return held

    def _evict(self, keep: str) -> None:
        def over():
            loose = [h for h in self._runs.values() if not h.pinned]
            return len(loose) > self.max_runs or sum(h.nbytes for h in loose) > self.max_bytes

        for run_id in [k for k, h in self._runs.items() if not h.pinned and k != keep]:
            if not over():
                break
            held = self._runs.pop(run_id)
            self.evicted[run_id] = held.label
            if held.owned_dir is not None:
                shutil.rmtree(held.owned_dir, ignore_errors=True)

    def options(self) -> list[dict]:
        with self._lock:
            runs = sorted(self._runs.values(), key=lambda h: int(h.id[3:]))
        return [{"label": f"{h.label} ({h.id})", "value": h.id} for h in runs]

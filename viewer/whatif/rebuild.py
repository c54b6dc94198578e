"""Rebuild, per step and rank, the framework chain (compute, wait, compute, ...) the replay needs."""
from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass, field

import pandas as pd

from tracer import vocab as V

CACHED_ID_BASE = 1 << 40   # response ids at or above this ran through the response cache


@dataclass
class Tensor:
    """One logical tensor op of a step (the same name and occurrence on every rank)."""
    name: str
    op: str
    dtype: str
    nbytes: int
    process_set: int
    priority: int                # its priority= (0 where the trace has none)
    cached: bool
    submit: dict                 # rank -> (segment, offset ns, CPU work in the segment before it)
    done_ns: dict                # rank -> measured completion, ns since the rank's step start
    response: int = -1           # the measured response it ran in
    backend: str = ""
    wait: dict = field(default_factory=dict)   # rank -> index of the wait that consumed it (-1: none)


@dataclass
class Chain:
    """One rank's framework chain in one step."""
    gaps: list                   # compute before each wait (ns): gaps[i] = start of wait i - end of wait i-1
    waits_for: list              # per wait: indices into Step.tensors it waits on
    tail_ns: int                 # compute after the last wait
    phases: list = field(default_factory=list)   # (name, segment, offset, dur)
    cpu: list | None = None      # per segment (gaps, then the tail): [(from, to)] offsets of CPU work;
                                 # None: no phases recorded, all of it counts as CPU work
    unwaited: list = field(default_factory=list)   # indices into Step.tensors no wait consumed: the end waits

    def cpu_ns(self, k: int) -> int:
        """CPU work in segment ``k`` (k = len(gaps): the tail)."""
        length = self.gaps[k] if k < len(self.gaps) else self.tail_ns
        return length if self.cpu is None else sum(b - a for a, b in self.cpu[k])

    def cpu_before(self, k: int, off: float) -> float:
        """CPU work in segment ``k`` before ``off``."""
        if self.cpu is None:
            return off
        return sum(max(0.0, min(b, off) - a) for a, b in self.cpu[k])


@dataclass
class Step:
    step: int
    t0: dict                     # rank -> step start (ns, common axis)
    measured: dict               # rank -> measured step duration (ns)
    chains: dict                 # rank -> Chain
    tensors: list                # [Tensor]
    responses: list              # measured: [(response, backend, op, nbytes, start_ns, cost_ns)]


def rebuild(tables) -> list[Step]:
    """The steps of a run that every rank completed (a step with an unfinished op is left out)."""
    ev, ops = tables.events, tables.tensor_ops
    ranks = sorted(int(r) for r in ops["rank"].unique()) if len(ops) else []
    if not ranks:
        return []
    spans = ev[ev["ph"] == "X"]
    st, sy, ph = (spans[m] for m in (spans["name"] == V.STEP, spans["name"] == V.SYNCHRONIZE, spans["cat"] == "phase"))
    by_rank = {r: _windowed(ops[ops["rank"] == r], "submit_ns") for r in ranks}
    syncs = {r: _windowed(sy[sy["rank"] == r], "t_ns") for r in ranks}
    phases = {r: _windowed(ph[ph["rank"] == r], "t_ns") for r in ranks}
    fo = tables.fused_ops
    backends = {int(r): str(b) for r, b in zip(fo["response"], fo["backend"]) if isinstance(b, str)}
    built = (_build_step(s, w, by_rank, syncs, phases, fo, backends, bool(len(st)))
             for s, w in _step_windows(st, ops, ranks))
    return [b for b in built if b is not None]


def _windowed(df, col: str):
    """A function of (a, b): the rows of ``df`` with ``a <= df[col] < b``."""
    df = df.sort_values(col, kind="stable")
    t = df[col].to_numpy()
    return lambda a, b: df.iloc[int(t.searchsorted(a, "left")):int(t.searchsorted(b, "left"))]


def _step_windows(st, ops, ranks):
    """[(step, {rank: (t0, t1)})] for the STEP spans ``st`` every rank has, else one per occurrence."""
    if len(st):
        found = [(s, {int(r): (int(t), int(t) + int(d)) for r, t, d in zip(g["rank"], g["t_ns"], g["dur_ns"])})
                 for s, g in st.groupby("step")]
    else:
        spans = [(occ, g.groupby("rank").agg(a=("submit_ns", "min"), b=("done_ns", "max")))
                 for occ, g in ops.dropna(subset=["done_ns"]).groupby("occurrence")]
        found = [(occ, {int(r): (int(a), int(b)) for r, a, b in zip(w.index, w["a"], w["b"])}) for occ, w in spans]
    return [(int(s), win) for s, win in found if set(win) >= set(ranks)]


def _build_step(s, windows, by_rank, syncs, phases, fused, backends, has_steps):
    t0 = {r: w[0] for r, w in windows.items()}
    tensors: dict = {}
    chains = {}
    for r, (a, b) in windows.items():
        if r not in by_rank:
            return None
        mine = by_rank[r](a, b)
        if mine["done_ns"].isna().any():
            return None   # an op that never finished: nothing to replay
        sy = syncs[r](a, b)
        ends = [int(t + d) - a for t, d in zip(sy["t_ns"], sy["dur_ns"])]
        starts = [int(t) - a for t in sy["t_ns"]]
        waits_for: list = [[] for _ in starts]
        sync_names = sy["tensor"].tolist()
        for row in mine.itertuples(index=False):
            key = (str(row.tensor), int(row.occurrence))
            sub = int(row.submit_ns) - a
            done = int(row.done_ns) - a
            t = tensors.get(key)
            if t is None:
                resp = int(row.response)
                t = tensors[key] = Tensor(
                    str(row.tensor), str(row.op), str(row.dtype), int(row.bytes) if pd.notna(row.bytes) else 0,
                    int(row.process_set), int(row.priority) if pd.notna(getattr(row, "priority", None)) else 0,
                    resp >= CACHED_ID_BASE, {}, {}, resp)
            t.submit[r] = _place(sub, ends)
            t.done_ns[r] = done
            t.wait[r] = _wait_index(str(row.tensor), sub, done, starts, ends, sync_names)
        gaps = [st - prev for st, prev in zip(starts, [0, *ends])]
        ph = phases[r](a, b)
        placed = [(str(n), *_place(int(t) - a, ends), int(d)) for n, t, d in zip(ph["name"], ph["t_ns"], ph["dur_ns"])]
        last = ends[-1] if ends else 0
        tail = (b - a) - last if has_steps else 0   # without STEP spans the step ends with its last collective
        chains[r] = Chain(gaps, waits_for, tail, placed, _cpu_work(ph, a, starts, ends, tail + last))
    for t in tensors.values():   # (constant over the replay's iterations)
        t.submit = {r: (k, off, chains[r].cpu_before(k, off)) for r, (k, off) in t.submit.items()}
    full = [t for t in tensors.values() if set(t.submit) == set(windows)]
    if len(full) != len(tensors):
        return None   # a tensor some rank did not submit in this step (a hang, a skipped op)
    for i, t in enumerate(full):
        t.backend = backends.get(t.response, "")
        for r, w in t.wait.items():
            if w >= 0:
                chains[r].waits_for[w].append(i)
            else:
                chains[r].unwaited.append(i)
    return Step(s, t0, {r: b - a for r, (a, b) in windows.items()}, chains, full,
                _responses(fused, windows))


def _cpu_work(ph, a: int, starts: list, ends: list, end: int) -> list | None:
    """Per segment, the offsets of the rank's CPU work (None: no phases recorded)."""
    spans = {n: [(int(t) - a, int(t) + int(d) - a) for t, d in zip(g["t_ns"], g["dur_ns"])]
             for n, g in ph.groupby("name")} if len(ph) else {}
    fb = spans.get(V.FORWARD, []) + spans.get(V.BACKWARD, [])
    if not fb:
        return None
    busy = [(min(x for x, _ in fb), max(y for _, y in fb)), *spans.get(V.OPTIMIZER_STEP, [])]
    idle = spans.get(V.DATA_WAIT, [])
    return [[(x - lo, y - lo) for x, y in _subtract(_clip(busy, lo, hi), _clip(idle, lo, hi))]
            for lo, hi in zip([0, *ends], [*starts, end])]


def _clip(spans, lo, hi):
    """The spans within [lo, hi], merged and sorted."""
    out: list = []
    for x, y in sorted((max(x, lo), min(y, hi)) for x, y in spans):
        if y <= x:
            continue
        if out and x <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], y))
        else:
            out.append((x, y))
    return out


def _subtract(spans, holes):
    out = []
    for x, y in spans:
        for hx, hy in holes:
            if hy <= x or hx >= y:
                continue
            if hx > x:
                out.append((x, hx))
            x = max(x, hy)
        if y > x:
            out.append((x, y))
    return out


def _place(t: int, ends: list) -> tuple[int, int]:
    """(segment, offset) of a time on a rank's chain (``ends``: the waits' ends, ascending)."""
    k = bisect.bisect_right(ends, t)
    return k, t - (ends[k - 1] if k else 0)


def _wait_index(name, sub, done, starts, ends, names) -> int:
    """The wait that consumed this op: its own SYNCHRONIZE, else the first to end after it, else -1."""
    own = (i for i, (s, n) in enumerate(zip(starts, names)) if n == name and s >= sub)
    later = (i for i, (s, e) in enumerate(zip(starts, ends)) if e >= done and s >= sub)
    return next(itertools.chain(own, later), -1)


def _responses(fused, windows):
    """Measured responses of the step: cost = the shortest rank's FUSED_RESPONSE, start = the last rank's."""
    out = []
    lo = min(a for a, _ in windows.values())
    hi = max(b for _, b in windows.values())
    f = fused[(fused["start_ns"] >= lo) & (fused["start_ns"] < hi)]
    for resp, g in f.groupby("response"):
        if len(g) < len(windows):
            continue
        cost = int((g["end_ns"] - g["start_ns"]).min())
        out.append((int(resp), str(g["backend"].iloc[0]), str(g["op"].iloc[0]), int(g["bytes"].max()),
                    int(g["start_ns"].max()), cost))
    return out

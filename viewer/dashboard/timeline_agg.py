"""Server-side aggregation of the timeline: the browser never receives raw events. For a window drawn ``px``
pixels wide, spans a few pixels long or more are sent as themselves; shorter ones are merged per lane into
coverage bars (runs of pixels of one dominant phase and a similar busy fraction). The total stays under
``max_bars``, the pixel grid coarsened when needed. A span's class (its colour) comes from ``viewer/vocab.py``'s
phases (a phase added there shows here too), then the runtime's own stages, torch.profiler's categories, GPU
kernels and elastic resets."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from viewer import units, vocab

# span class -> colour, background to foreground: where spans overlap on a lane (a rank's lane holds all its
# threads) the later class is drawn on top and names a merged bar; the legend lists them in this order
PHASES = {
    "STEP": "#d9d9d9", "other": "#7f7f7f", "annotation": "#d4a6c8", "Python": "#b6992d", "CPU op": "#a0cbe8",
    "CUDA runtime": "#f1ce63", "tensor": "#bab0ac", "QUEUE": "#eeca3b", "NEGOTIATE": "#f58518", "CYCLE": "#9d755d",
    "FUSED_RESPONSE": "#72b7b2", "MEMCPY_IN": "#b279a2", "MEMCPY_OUT": "#ff9da6", "GPU memcpy": "#9c755f",
    "GPU kernel": "#2ca02c", "GPU NCCL": "#1f3d7a", "COMM": "#4c78a8", "REDUCE_SCATTER": "#54a24b",
    "ALLGATHER": "#88d27a",
    # a hierarchical allreduce: reduce and broadcast within a host, the allreduce across hosts
    "INTRA_HOST": "#9ecae9", "CROSS_HOST": "#6b4c9a",
    **{p.span: p.colour for p in sorted(vocab.PHASES, key=lambda p: -p.precedence) if p.span},
    "ELASTIC": "#8c564b",
}
PHASE_NAMES = list(PHASES)

_EXACT = {n: n for n in ("STEP", *(p.span for p in vocab.PHASES if p.span), "QUEUE", "FUSED_RESPONSE", "CYCLE")}
# the runtime's stages by the start of their name, the first that matches
_PREFIXES = (("MEMCPY_IN_", "MEMCPY_IN"), ("MEMCPY_OUT_", "MEMCPY_OUT"), ("RING_REDUCE_SCATTER", "REDUCE_SCATTER"),
             ("RING_ALLGATHER", "ALLGATHER"), ("INTRA_HOST_", "INTRA_HOST"), ("CROSS_HOST_", "CROSS_HOST"),
             ("ELASTIC_", "ELASTIC"), ("NEGOTIATE_", "NEGOTIATE"),
             *((k, "COMM") for k in ("RING_", "MPI_", "NCCL_", "GLOO_")))
# torch.profiler's names that say what a span is part of (prefix or suffix -> class), then its category's class
_KINETO_NAMES = (("ProfilerStep#", "STEP"), ("## forward", "FORWARD"), ("## backward", "BACKWARD"),
                 ("autograd::engine", "BACKWARD"), ("## optimizer", "OPTIMIZER_STEP"), ("Optimizer.", "OPTIMIZER_STEP"),
                 ("nccl:", "COMM"), ("c10d::", "COMM"), ("record_param_comms", "COMM"), (".forward", "FORWARD"))
_KINETO_CATS = {"cpu_op": "CPU op", "cuda_runtime": "CUDA runtime", "cuda_driver": "CUDA runtime",
                "python_function": "Python", "user_annotation": "annotation", "gpu_user_annotation": "annotation",
                "gpu_memcpy": "GPU memcpy", "gpu_memset": "GPU memcpy"}


def phase_of(thread: str, name: str, depth: int, cat: str = "") -> str:
    """The class of one span, from its thread, name, nesting depth and category."""
    if name in _EXACT:
        return _EXACT[name]
    if cat in _KINETO_CATS or thread.startswith(("gpu", "cpu:")):
        named = next((c for k, c in _KINETO_NAMES if name.startswith(k) or name.endswith(k)), None)
        if named or cat in _KINETO_CATS:
            return named or _KINETO_CATS[cat]
        return "GPU NCCL" if "nccl" in name.lower() else "GPU kernel" if thread.startswith("gpu") else "CPU op"
    default = "tensor" if thread == "tensor" and depth == 0 else "other"
    return next((c for k, c in _PREFIXES if name.startswith(k)), default)


# a rank's threads top down: the runtime's, torch.profiler's CPU threads, then GPU streams (by their first 4 letters)
_THREAD_ORDER = {"fram": 0, "tens": 1, "nego": 2, "fusi": 3, "back": 4, "cycl": 5, "cpu:": 6, "gpu:": 7}
MIN_EXACT_PX = 3  # spans at least this many pixels long are drawn as themselves
LEVELS = 4        # busy-fraction levels of a merged bar
RANK = "\u25b8"   # a rank's one lane ("r3 \u25b8"): every thread of it, until expanded


@dataclass
class Lane:
    rank: int
    thread: str | None     # None: the rank's lane
    depth: int
    label: str
    start: np.ndarray      # sorted int64
    end: np.ndarray
    phase: np.ndarray      # int index into PHASE_NAMES
    rows: np.ndarray       # positions in the events table
    max_dur: int


@dataclass
class WindowView:
    """What one window of the timeline sends: bars per phase (ms since the run's first event) and counts."""
    t0_ns: int
    t1_ns: int
    origin_ns: int                   # the run's first event: 0 ms on the axis
    lanes: list                      # lane labels, top to bottom
    hosts: list = field(default_factory=list)  # each lane's host (None when unknown), parallel to lanes
    ranks: list = field(default_factory=list)  # each lane's rank, parallel to lanes
    labels: dict = field(default_factory=dict)  # rank (collapsed) or (rank, thread, depth) (expanded) -> lane
    bars: dict = field(default_factory=dict)  # phase -> {"y","base","width","opacity","text"}
    n_events: int = 0                # spans overlapping the window
    n_exact: int = 0
    n_hidden: int = 0                # spans long enough to draw exactly but wholly under those drawn over them
    n_merged_bars: int = 0

    @property
    def n_bars(self) -> int:
        return self.n_exact + self.n_merged_bars

    @property
    def expanded(self) -> set:
        """The ranks shown as their threads' lanes."""
        return set(self.ranks) - set(self.labels)

    def lane_of(self, rank: int, thread: str, depth: int):
        """The lane shown for a span of (rank, thread, depth): its rank's lane unless expanded; None if hidden."""
        return self.labels.get(rank) or self.labels.get((rank, thread, depth))


def thread_name(thread: str, role: str = "", name: str = "") -> str:
    """A lane's thread as people name it: torch.profiler's ``gpu:7`` is stream 7, ``cpu:<tid>`` the trace's
    ``name`` for it (else thread <tid>), then its ``role`` unless the name says it."""
    kind, _, rest = thread.partition(":")
    if kind.startswith("gpu") and rest:
        stream, _, ann = rest.partition(":")
        return (f"GPU {kind[3:]} " if kind[3:] else "") + f"stream {stream}" + (f" {ann}" if ann else "")
    if kind != "cpu" or not rest:
        return thread
    name = name or f"thread {rest}"
    return name + (f" ({role})" if role and role not in name else "")


def _unique_names(names: dict) -> dict:
    """``{thread: name}`` with the thread id after a name two threads share (``cpu:<tid>``: the id)."""
    seen = Counter(names.values())
    return {t: f"{n} {t.partition(':')[2]}" if seen[n] > 1 else n for t, n in names.items()}


class TimelineIndex:
    """A run's spans in lanes: one per rank (all its spans but its steps, which the axis labels) and, for a rank
    expanded, one per (thread, depth); grouped by ``hosts`` (``{rank: host}``) in order of their first rank. The
    whole run is its first event to its last event's end (the headline's ``duration_ms``). ``thread_names``: the
    run's ``meta["thread_names"]`` (a Kineto rank's threads, ``{"<rank>": {thread: name}}``)."""

    def __init__(self, events: pd.DataFrame, hosts: dict | None = None, thread_names: dict | None = None):
        self.events = events
        self.hosts = dict(hosts or {})
        self.t_min = int(events["t_ns"].min()) if len(events) else 0
        self.t_max = int((events["t_ns"] + events["dur_ns"]).max()) if len(events) else 0
        is_span = ((events["ph"] == "X") & (events["dur_ns"] > 0)).to_numpy()
        self.lanes: list[Lane] = []       # the threads' lanes
        self.rank_lanes: dict[int, Lane] = {}
        if not is_span.any():
            return

        def col(c):
            return events[c].to_numpy(dtype=np.int64)[is_span]

        (tc, threads), (nc, names), (cc, cats) = ((codes[is_span], values) for codes, values in
                                                  (_codes(events[c]) for c in ("thread", "name", "cat")))
        depth = col("depth")
        nd = int(depth.max()) + 1
        combo, inv = np.unique(((tc * len(names) + nc) * nd + depth) * len(cats) + cc, return_inverse=True)
        rest, c = np.divmod(combo, len(cats))
        rest, d = np.divmod(rest, nd)
        t, n = np.divmod(rest, len(names))
        lookup = np.array([PHASE_NAMES.index(phase_of(threads[i], names[j], int(k), cats[m]))
                           for i, j, k, m in zip(t, n, d, c)], dtype=np.int16)
        phase = lookup[inv.reshape(-1)]
        start = col("t_ns")
        end = start + col("dur_ns")
        rows = np.flatnonzero(is_span)
        rank = col("rank")
        step = phase == 0   # the steps: on the axis, not in a lane
        main = {(r, threads[i]) for r, i in zip(rank[step], tc[step]) if threads[i].startswith("cpu:")}
        named = {int(r): _unique_names(n) for r, n in (thread_names or {}).items()}
        for r, i, dep, idx in _groups((rank, tc, depth), start, step):
            thr = threads[i]
            label = f"r{r} {thread_name(thr, 'main' if (r, thr) in main else '', named.get(r, {}).get(thr, ''))}" \
                + (f" ·{dep}" if dep else "")
            self.lanes.append(_lane(r, thr, dep, label, idx, start, end, phase, rows))
        for r, idx in _groups((rank,), start, step):
            self.rank_lanes[r] = _lane(r, None, 0, f"r{r} {RANK}", idx, start, end, phase, rows)
        order = {h: k for k, h in enumerate(dict.fromkeys(self.hosts[r] for r in sorted(self.hosts)))}
        self.lanes.sort(key=lambda ln: (ln.rank, _THREAD_ORDER.get(ln.thread[:4], 9), ln.label))
        self.order = sorted(self.rank_lanes, key=lambda r: (order.get(self.hosts.get(r), len(order)), r))

    @property
    def ranks(self) -> list[int]:
        return sorted(self.rank_lanes)

    def shown(self, ranks=None, expand=()) -> list[Lane]:
        """The lanes of ``ranks`` (default: all), in host order: a rank's lane, or its threads' when in ``expand``."""
        keep = set(self.order if ranks is None else ranks)
        return [ln for r in self.order if r in keep
                for ln in ([x for x in self.lanes if x.rank == r] if r in set(expand) else [self.rank_lanes[r]])]

    def window(self, t0=None, t1=None, ranks=None, expand=(), px: int = 1200, max_bars: int = 8000) -> WindowView:
        """Bars for the window [t0, t1] (ns; default: the whole run) over ``ranks`` (default: all), one lane per
        rank but those in ``expand``, which show a lane per thread."""
        t0 = self.t_min if t0 is None else int(t0)
        t1 = self.t_max if t1 is None else int(t1)
        if t1 <= t0:
            t1 = t0 + 1
        lanes = self.shown(ranks, expand)
        clipped = [_clip(ln, t0, t1) for ln in lanes]
        vis = [c[1] - c[0] for c in clipped]
        n_events = int(sum(len(v) for v in vis))
        bin_ns = (t1 - t0) / max(px, 1)
        min_exact = MIN_EXACT_PX * bin_ns
        all_vis = np.concatenate(vis) if vis else np.empty(0)
        budget = max_bars // 2
        if (all_vis >= min_exact).sum() > budget:   # keep only the longest spans exact
            min_exact = max(min_exact, float(np.partition(all_vis, len(all_vis) - budget)[len(all_vis) - budget]) + 1)
        labels = {ln.rank if ln.thread is None else (ln.rank, ln.thread, ln.depth): ln.label for ln in lanes}
        view = WindowView(t0, t1, self.t_min, [ln.label for ln in lanes], [self.hosts.get(ln.rank) for ln in lanes],
                          [ln.rank for ln in lanes], labels, n_events=n_events)
        acc: dict = {}
        binned = []
        for ln, (s, e, ph, rows), v in zip(lanes, clipped, vis):
            exact = v >= min_exact
            shown = exact & _on_top(s, e, ph, exact, t0, bin_ns / 2, 2 * px)
            _add_exact(acc, self.events, ln, s[shown] - self.t_min, e[shown] - self.t_min, ph[shown], rows[shown])
            view.n_exact += int(shown.sum())
            view.n_hidden += int(exact.sum() - shown.sum())
            for q in np.unique(ph[exact & ~shown]):   # a phase wholly under others keeps its legend entry
                _put(acc, int(q), ln.label, np.empty(0), np.empty(0), np.empty(0), [])
            binned.append(_bins(s[~exact] - t0, e[~exact] - t0, ph[~exact], t1 - t0, px))
        step = 1   # bins merged into one: doubled until the bars fit
        while True:
            runs = [_runs(b, step) for b in binned]
            view.n_merged_bars = sum(len(r[0]) for r in runs)
            if view.n_bars <= max_bars or px // step <= 16:
                break
            step *= 2
        for ln, r in zip(lanes, runs):
            _add_merged(acc, ln, *r, t0 - self.t_min)
        view.bars = {p: {k: (np.concatenate(v) if k != "text" else sum(v, [])) for k, v in acc[p].items()}
                     for p in PHASE_NAMES if p in acc}   # in drawing order
        return view


def _codes(col):
    """(codes, values) of a column of strings, a missing value coded as its last value, ""."""
    codes, values = pd.factorize(col)
    return codes.astype(np.int64) % (len(values) + 1), np.append(np.asarray(values, dtype=object), "")


def _groups(keys, start, drop):
    """(*key, row positions by start) of each distinct tuple of ``keys`` over the rows not in ``drop``."""
    keep = np.flatnonzero(~drop)
    order = keep[np.lexsort((start[keep], *(k[keep] for k in keys[::-1])))]
    cut = np.flatnonzero(np.any([np.diff(k[order]) != 0 for k in keys], axis=0)) + 1
    for idx in np.split(order, cut):
        if len(idx):
            yield (*(int(k[idx[0]]) for k in keys), idx)


def _lane(rank, thread, depth, label, idx, start, end, phase, rows) -> Lane:
    s, e = start[idx], end[idx]   # idx: by start
    return Lane(rank, thread, depth, label, s, e, phase[idx], rows[idx], int((e - s).max()))


def _clip(ln: Lane, t0: int, t1: int):
    lo = np.searchsorted(ln.start, t0 - ln.max_dur, "left")
    hi = np.searchsorted(ln.start, t1, "left")
    s, e = ln.start[lo:hi], ln.end[lo:hi]
    m = e > t0
    return np.maximum(s[m], t0), np.minimum(e[m], t1), ln.phase[lo:hi][m], ln.rows[lo:hi][m]


def _on_top(s, e, ph, exact, t0, col_ns, cols):
    """Which ``exact`` spans of a lane show: not wholly under the opaque exact spans drawn after them (a higher
    phase, else a later start), in columns of ``col_ns`` (half a pixel). A rank's one lane holds all its threads'
    spans, most of them under others (a tensor's op under its neighbours'): the browser would draw them unseen."""
    idx = np.flatnonzero(exact)
    keep = np.zeros(len(s), dtype=bool)
    if not len(idx):
        return keep
    lo = np.clip(((s[idx] - t0) / col_ns).astype(np.int64), 0, cols - 1)
    hi = np.clip(np.ceil((e[idx] - t0) / col_ns).astype(np.int64), lo + 1, cols)
    covered = np.zeros(cols, dtype=bool)
    left = cols
    for k in np.lexsort((s[idx], ph[idx]))[::-1]:   # the last drawn first
        a, b = lo[k], hi[k]
        seen = b - a - int(np.count_nonzero(covered[a:b]))
        if seen:
            keep[idx[k]] = True
            covered[a:b] = True
            left -= seen
            if not left:
                break
    return keep


def _put(acc, phase, y, base, width, opacity, text):
    d = acc.setdefault(PHASE_NAMES[phase], {"y": [], "base": [], "width": [], "opacity": [], "text": []})
    for key, value in zip(d, (np.full(len(base), y, dtype=object), base, width, opacity, text)):
        d[key].append(value)


def _add_exact(acc, events, ln, s, e, ph, rows):
    if not len(s):
        return
    names, tensors = (events[c].iloc[rows].to_numpy(dtype=object, na_value="") for c in ("name", "tensor"))
    nbytes = events["bytes"].iloc[rows].to_numpy(dtype=object)
    for p in np.unique(ph):
        m = ph == p
        text = [f"{n}<br>{t + '<br>' if t and t != n else ''}{units.duration(b - a)}"
                f"{'' if pd.isna(nb) else ' · ' + units.size(nb)}"
                for n, t, a, b, nb in zip(names[m], tensors[m], s[m], e[m], nbytes[m])]
        _put(acc, int(p), ln.label, s[m] / 1e6, (e[m] - s[m]) / 1e6, np.ones(int(m.sum())), text)


def _coverage(s, e, edges):
    """Busy time of the spans [s, e) inside each bin between consecutive ``edges`` (all float)."""
    ss, es = np.sort(s), np.sort(e)
    cs = np.concatenate([[0.0], np.cumsum(ss)])
    ce = np.concatenate([[0.0], np.cumsum(es)])
    ns = np.searchsorted(ss, edges, "left")
    ne = np.searchsorted(es, edges, "left")
    busy = (ns * edges - cs[ns]) - (ne * edges - ce[ne])
    return np.diff(busy)


def _bins(s, e, ph, span, px):
    """Per class present, the fraction of each of ``px`` bins over [0, span) its spans cover; and how many
    spans start in each bin."""
    edges = np.linspace(0.0, float(span), px + 1)
    phases, k = np.unique(ph, return_inverse=True)
    # one pass for every class: class k's spans and bins moved k windows further along the line
    shift = k.reshape(-1) * (span + 1.0)
    cov = _coverage(s + shift, e + shift, (edges + (span + 1.0) * np.arange(len(phases))[:, None]).ravel())
    cov = np.append(cov, 0.0).reshape(-1, px + 1)[:, :px] if len(phases) else np.zeros((0, px))
    counts = np.bincount(np.minimum((s / edges[1]).astype(np.int64), px - 1), minlength=px)
    return phases, cov / edges[1], counts, edges


def _runs(binned, step):
    """The merged bars on bins of ``step`` bins: runs of one dominant class and busy level; (first and last edge,
    class, busy fraction, spans) of each."""
    phases, cov, counts, edges = binned
    px = len(counts)
    if not len(phases):
        return (np.empty(0),) * 5
    cut = np.arange(0, px, step)
    cov = np.add.reduceat(cov, cut, axis=1) / np.diff(np.r_[cut, px])
    counts, edges = np.add.reduceat(counts, cut), edges[np.r_[cut, px]]
    total = np.clip(cov.sum(axis=0), 0.0, 1.0)
    # the foremost class covering a good part of the bin (else the most covering one)
    eligible = cov >= np.minimum(0.3, cov.max(axis=0))
    dominant = phases[len(phases) - 1 - np.argmax(eligible[::-1], axis=0)]
    level = np.ceil(total * LEVELS).astype(np.int64)
    key = np.where(level > 0, dominant.astype(np.int64) * (LEVELS + 1) + level, -1)
    starts = np.flatnonzero(np.r_[True, np.diff(key) != 0])
    stops = np.r_[starts[1:], len(key)]
    keep = key[starts] >= 0
    starts, stops = starts[keep], stops[keep]
    csum, tsum = np.r_[0, np.cumsum(counts)], np.r_[0.0, np.cumsum(total)]
    return (edges[starts], edges[stops], dominant[starts], (tsum[stops] - tsum[starts]) / (stops - starts),
            csum[stops] - csum[starts])


def _add_merged(acc, ln, lo, hi, dom, busy, n_ev, shift) -> None:
    """The merged bars of one lane (edges in ns since the window's start, ``shift`` ns after the origin)."""
    base, wid = (lo + shift) / 1e6, (hi - lo) / 1e6
    for p in np.unique(dom):
        m = dom == p
        text = [f"{units.count(n)} spans merged<br>{units.pct(b * 100)} busy · mostly {PHASE_NAMES[int(p)]}"
                f"<br>{units.duration(w * 1e6)}" for n, b, w in zip(n_ev[m], busy[m], wid[m])]
        _put(acc, int(p), ln.label, base[m], wid[m], np.clip(0.25 + 0.75 * busy[m], 0.0, 1.0), text)

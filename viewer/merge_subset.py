"""Which ranks a subset merge takes (``ringscope merge --ranks``, ``--top-late``): a written rank list, and the run's
latest ranks by its straggler analysis with one on-time rank to read them against."""
from __future__ import annotations

import re

_SPAN = re.compile(r"(\d+)(?:-(\d+))?")
MAX_SPAN = 1 << 20   # a range wider than any run: a typo (0-1000000000), not a subset


def parse_ranks(spec: str) -> set[int]:
    """``0,17,200-203`` as a set of ranks; :class:`ValueError` with one phrase saying what is wrong."""
    out: set[int] = set()
    for part in spec.split(","):
        m = _SPAN.fullmatch(part.strip())
        if m is None:
            raise ValueError(f"{part.strip()!r} is not a rank or a range of ranks (write e.g. 0,17,200-203)")
        lo, hi = int(m[1]), int(m[2] if m[2] is not None else m[1])
        if hi < lo:
            raise ValueError(f"{part.strip()!r} runs backwards (write the low rank first: {hi}-{lo})")
        if hi - lo > MAX_SPAN:
            raise ValueError(f"{part.strip()!r} spans more than {MAX_SPAN} ranks")
        out.update(range(lo, hi + 1))
    return out


def top_late(path, k: int, cache_dir=None) -> tuple[list[int], int]:
    """The ``k`` ranks the run's ``stragglers`` analysis puts first (most wait imposed on the others), and the
    reference rank: rank 0, the coordinator, on whose clock the others are aligned, or when it is among them the
    most punctual other rank (the least median lateness). Read from the run's store (built first when absent):
    its tensor ops and readiness ticks, which the analysis reads, not its events."""
    from viewer import frames, query
    from viewer.errors import TraceError
    from viewer.run import Run, Unavailable
    from viewer.schema import RunTables

    entry = query.store_of(path, cache_dir)
    con = query.connect(entry)
    ops, ready, ranks = (frames.conform(t, con.execute(f"SELECT * FROM {t}").df())
                         for t in ("tensor_ops", "readiness", "ranks"))
    con.close()
    size = int(ranks["size"].max()) if ranks["size"].notna().any() else len(ranks)
    run = Run(RunTables(frames.empty("events"), ops, frames.empty("fused_ops"), ready, frames.empty("cycles"),
                        ranks, {"size": size}))
    try:
        strag = run.stragglers()
    except Unavailable as exc:
        raise TraceError(path, f"--top-late: no lateness to rank by ({exc})") from None
    late = [int(r) for r in strag["rank"][:k]]
    punctual = strag[~strag["rank"].isin(late)].sort_values(["median_lateness_ns", "rank"])["rank"]
    return late, 0 if 0 not in late or not len(punctual) else int(punctual.iloc[0])

"""Which ranks a subset merge takes (``ringscope merge --ranks``, ``--top-late``): a written rank list, and the run's
latest ranks by its straggler analysis with one on-time rank to read them against."""
from __future__ import annotations

import json
import re

from viewer import cache as _cache

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
    """The ``k`` ranks the run's ``stragglers`` analysis puts first (most wait imposed on the others; only ranks
    that were ever last to be ready), and the reference rank: rank 0, the coordinator, on whose clock the others
    are aligned, or when it is among them the most punctual other rank (the least median lateness). The run's
    tables come from its store (built first when absent), as the loader made them; its events are not read
    whole."""
    from viewer import query
    from viewer.errors import TraceError
    from viewer.run import Run, Unavailable

    entry = query.store_of(path, cache_dir)
    run = Run(_cache.stored_tables(entry, json.loads((entry / _cache.RUN_INFO).read_text())))
    try:
        strag = run.stragglers()
    except Unavailable as exc:
        raise TraceError(path, f"--top-late: no lateness to rank by ({exc})") from None
    late = [int(r) for r in strag.loc[strag["times_last"] > 0, "rank"][:k]]   # fewer when fewer were ever last
    if not late:
        raise TraceError(path, "--top-late: no rank was ever the last to be ready")
    punctual = strag[~strag["rank"].isin(late)].sort_values(["median_lateness_ns", "rank"])["rank"]
    return late, 0 if 0 not in late or not len(punctual) else int(punctual.iloc[0])

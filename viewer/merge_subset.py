"""Which ranks a subset merge takes (``ringscope merge --ranks``, ``--top-late``): a written rank list, and the run's
latest ranks by its straggler analysis with one on-time rank to read them against."""
from __future__ import annotations

import json
import re
from pathlib import Path

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
    are aligned, or when it is among them the most punctual other rank (the least median lateness). The run
    comes from its store (built first when absent) with the tables that analysis reads, its tensor ops and
    readiness ticks, and not its events."""
    from viewer import query
    from viewer.errors import TraceError
    from viewer.loader import assemble
    from viewer.ringscope import elastic
    from viewer.run import Run, Unavailable

    entry = query.store_of(path, cache_dir)
    manifest = elastic.read_manifest(path) if elastic.is_elastic(path) else None
    parsed = [_ops_of(entry, i) for i in json.loads((entry / _cache.RUN_INFO).read_text())["kept"]]
    if manifest:
        elastic.continue_occurrences(parsed)
    run = Run(assemble(parsed, manifest))   # the loader's alignment, of these tables only
    try:
        strag = run.stragglers()
    except Unavailable as exc:
        raise TraceError(path, f"--top-late: no lateness to rank by ({exc})") from None
    late = [int(r) for r in strag.loc[strag["times_last"] > 0, "rank"][:k]]   # fewer when fewer were ever last
    if not late:
        raise TraceError(path, "--top-late: no rank was ever the last to be ready")
    punctual = strag[~strag["rank"].isin(late)].sort_values(["median_lateness_ns", "rank"])["rank"]
    return late, 0 if 0 not in late or not len(punctual) else int(punctual.iloc[0])


def _ops_of(entry: Path, i: int) -> dict:
    """The ``i``-th file's parse from the store with its tensor ops and readiness ticks, the other tables empty."""
    import pyarrow.parquet as pq

    from viewer import frames

    stem = entry / _cache.rank_stem(i)
    info = json.loads(stem.with_name(stem.name + ".json").read_text())
    out = {"rank_info": info["rank_info"], "meta": info["meta"],
           **{t: frames.empty(t) for t in ("events", "fused_ops", "cycles")}}
    for t in ("tensor_ops", "readiness"):
        out[t] = pq.read_table(stem.with_name(f"{stem.name}.{t}.parquet"), use_threads=False).to_pandas()
    return out

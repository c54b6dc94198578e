"""Parse a run's trace files, each on its own: in worker processes when the run is big, into the run's store
(``viewer/cache.py``) when it has one; a file that cannot be read is reported in one line and left out."""
from __future__ import annotations

import os
import tempfile
import warnings
from pathlib import Path

from viewer import cache as _cache
from viewer import memory, parse_dask
from viewer.errors import TraceError, UnreadableTraceWarning
from viewer.io.files import detect_format

PARALLEL_BYTES = 64 << 20   # below this a run parses in this process: starting workers would cost more


def parse_one(path: Path) -> dict:
    """Per-file tables (local times)."""
    fmt = detect_format(path)
    if fmt == "merged":
        raise TraceError(path, "a merged trace (ringscope merge output): load the per-rank traces instead")
    if fmt == "horovod":
        from viewer.horovod import parse_file
    elif fmt == "kineto":
        from viewer.kineto.tables import parse_file
    else:
        from viewer.ringscope.tables import parse_file
    return parse_file(path)


def workers_for(files: list[Path]) -> int:
    """How many processes parse ``files``: ``RINGSCOPE_PARSE_WORKERS``, else the cores for a big run, else 1."""
    env = os.environ.get("RINGSCOPE_PARSE_WORKERS")
    if env and env.isdigit() and int(env) > 0:
        return min(int(env), len(files))
    if len(files) < 2 or sum(f.stat().st_size for f in files) < PARALLEL_BYTES:
        return 1
    return max(1, min(len(os.sched_getaffinity(0)), len(files), 16))


def parse_all(files: list[Path], member=None, progress=None, store: Path | None = None) -> tuple[list[int], list[dict]]:
    """(the indices of the files kept, their parsed tables) in file order; each also written to ``store``.
    ``member``: an elastic run's generations (parsed here, one after another: their state is shared)."""
    workers = 1 if member is not None else workers_for(files)
    tolerant = member is None and len(files) > 1
    address = parse_dask.scheduler() if member is None else None
    if address:   # on a Dask cluster (docs/CLUSTER.md)
        kept, parsed, bad = parse_dask.parse_on_cluster(files, address, progress, store, _parse_into, collect)
    elif workers > 1:
        kept, parsed, bad = _in_workers(files, workers, progress, store)
    else:
        kept, parsed, bad = _here(files, member, progress, store, tolerant)
    if bad and not parsed:
        raise TraceError(*bad[0])
    for path, problem in bad:
        warnings.warn(UnreadableTraceWarning(f"{path}: {problem}; left out, the other {len(parsed)} trace(s) "
                                             "analysed"), stacklevel=2)
    return kept, parsed


def _here(files, member, progress, store, tolerant):
    total, done = sum(f.stat().st_size for f in files), 0
    kept, parsed, bad = [], [], []
    for i, f in enumerate(files):
        try:
            p = member.parse(parse_one, f) if member is not None else parse_one(f)
        except TraceError as exc:
            if not tolerant:
                raise
            bad.append((exc.path, exc.problem))
            p = None
        if p is not None:   # None: a stopped world's rank that wrote nothing (reported)
            if store is not None:
                _cache.write_rank(store, i, p)
            kept.append(i)
            parsed.append(p)
        memory.release()
        done += f.stat().st_size
        if progress:
            progress(done, total, f)
    return kept, parsed, bad


def _in_workers(files, workers, progress, store):
    import multiprocessing
    import threading
    from concurrent.futures import ProcessPoolExecutor

    # fork: workers start at once and a script without a __main__ guard is not run again in them; with other
    # threads alive (the dashboard's), a forked child could inherit a lock one of them holds: a fork server
    if threading.active_count() == 1:
        ctx = multiprocessing.get_context("fork")
    else:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["viewer.parse"])
    dest = store if store is not None else Path(tempfile.mkdtemp(prefix="ringscope-parse-"))
    try:
        with ProcessPoolExecutor(workers, mp_context=ctx, initializer=memory.use_system_allocator) as pool:
            futures = [pool.submit(_parse_into, str(f), str(dest), i) for i, f in enumerate(files)]
            return collect(files, (fut.result() for fut in futures), dest, store, progress)
    finally:
        if store is None:
            _cache.discard(dest)


def collect(files, results, dest: Path, store: Path | None, progress):
    """(kept indices, parsed tables, bad (path, problem)) from the workers' ``results`` of :func:`_parse_into`,
    in file order: each file's warnings replayed here, its tables read back from ``dest`` (then deleted there
    when the run keeps no store)."""
    total, done = sum(f.stat().st_size for f in files), 0
    kept, parsed, bad = [], [], []
    for i, (f, (info, caught, error)) in enumerate(zip(files, results)):
        _cache.replay(caught)
        if error is not None:
            bad.append(error)
        else:
            kept.append(i)
            parsed.append(_cache.read_rank(dest, i, info))
            if store is None:
                for p in dest.glob(f"{_cache.rank_stem(i)}.*"):
                    p.unlink()
        memory.release()
        done += f.stat().st_size
        if progress:
            progress(done, total, f)
    return kept, parsed, bad


def _parse_into(f: str, dest: str, i: int):
    """In a worker: parse file ``f`` into ``dest``; (its info, its warnings, None) or (None, warnings, (path,
    problem)) when it cannot be read."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            p = parse_one(Path(f))
        except TraceError as exc:
            return None, [_cache.recorded(w) for w in caught], (exc.path, exc.problem)
    _cache.write_rank(Path(dest), i, p)
    memory.release()
    return {"rank_info": p["rank_info"], "meta": p["meta"]}, [_cache.recorded(w) for w in caught], None


def report_missing(parsed: list[dict]) -> None:
    """One line naming the ranks of a run of our traces that have no trace (once its files are known to be
    one trace a rank: two files of one rank are the error to report)."""
    infos = [p["rank_info"] for p in parsed]
    if not infos or any(ri.get("format") != "ringscope" for ri in infos):
        return
    size = max((ri.get("size") or 0 for ri in infos), default=0)
    missing = sorted(set(range(size)) - {ri["rank"] for ri in infos})
    if missing:
        shown = ", ".join(map(str, missing[:20])) + (f" and {len(missing) - 20} more" if len(missing) > 20 else "")
        warnings.warn(UnreadableTraceWarning(
            f"{Path(infos[0]['file']).parent}: {len(missing)} of {size} ranks have no trace (rank {shown}); "
            f"the other {size - len(missing)} analysed"), stacklevel=4)

"""Find a run's trace files, parse each one and align them on one time axis (or fetch the run from the cache)."""
from __future__ import annotations

from pathlib import Path

from viewer import cache as _cache
from viewer import frames, memory
from viewer.errors import TraceError
from viewer.io.files import trace_files
from viewer.parse import parse_all, parse_one, report_missing  # noqa: F401  (parse_one: one file, for tools)
from viewer.ringscope import elastic
from viewer.schema import RunTables

# Each format's reader, pandas and the Kineto alignment load inside the functions that parse: `ringscope
# merge` finds and checks our traces through this module without them.

_TIME_COLUMNS = {
    "events": ("t_ns", "launch_ns"),   # launch_ns: a Kineto GPU event's launching CPU call
    "tensor_ops": ("submit_ns", "negotiated_ns", "start_ns", "done_ns", "end_ns"),
    "fused_ops": ("start_ns", "end_ns"),
    "readiness": ("ready_ns",),
    "cycles": ("start_ns", "end_ns"),
}
_PER_RANK_KEYS = {"rank", "pid", "host", "local_rank", "cross_rank", "base_epoch_ns", "clock_offset_ns",
                  "clock_offset_uncertainty_ns", "cpu_set"}


def find_traces(path) -> list[Path]:
    """A run's trace files: ``path``, an elastic run's every generation's, or a directory's (and its ``kineto/``)."""
    p = Path(path)
    if not p.exists():
        raise TraceError(p, "no such file or directory")
    if p.is_file():
        return [p]
    if elastic.is_elastic(p):   # every generation's traces (docs/ELASTIC.md)
        return [f for _, fs in elastic.generation_files(p, elastic.read_manifest(p)) for f in fs]
    files = trace_files(p)
    if not files:
        raise TraceError(p, "directory holds no trace files (*.json, *.json.gz)")
    return files


def load_run(paths, use_cache: bool = True, cache_dir=None, progress=None) -> RunTables:
    """A run (a directory, one file or several) as :class:`RunTables`, from its store when no file changed."""
    manifest = elastic.read_manifest(paths) if isinstance(paths, (str, Path)) and elastic.is_elastic(paths) else None
    member = elastic.Members(paths, manifest) if manifest else None   # each file's generation
    if member is not None:
        files = list(member.generation)
    elif isinstance(paths, (str, Path)):
        files = find_traces(paths)
    else:
        files = [f for p in paths for f in find_traces(p)]
    if not use_cache or not files:
        return _load_files(files, member, manifest, progress, store=None)
    manifest_file = Path(paths) / elastic.MANIFEST if manifest else None
    hit = _cache.load(files, manifest_file, cache_dir)
    if hit is not None:   # the run's tables as the first load made them: no alignment, no merge
        stored, run = hit
        if progress:
            total = sum(f.stat().st_size for f in files)
            progress(total, total, files[-1])
        _cache.replay(run["warnings"])   # the first load's warnings, in its order
        memory.release()
        return stored
    tmp = _cache.building(files, manifest_file, cache_dir)
    with _cache.recording() as caught:
        try:
            tables = _load_files(files, member, manifest, progress, store=tmp)
        except BaseException:
            _cache.discard(tmp)
            raise
    if tmp is not None:
        run = {"kept": tables.meta.pop("_kept"), "warnings": [_cache.recorded(w) for w in caught],
               "shifts": tables.meta.pop("_shifts"), "meta": tables.meta}
        _cache.commit(tmp, files, run, manifest_file, cache_dir,
                      tables={t: getattr(tables, t) for t in _cache.RUN_TABLES})
    memory.release()
    return tables


def _load_files(files: list[Path], member, manifest: dict | None, progress, store: Path | None) -> RunTables:
    """Parse ``files`` (each into ``store`` too, when given) and assemble them; ``meta`` keeps ``_kept`` (the
    files parsed, by index) and ``_shifts`` (each one's shift onto the common axis) when ``store`` is given."""
    kept, parsed = parse_all(files, member, progress, store)
    if member is not None:
        member.report()
    tables = _finish(parsed, kept, manifest)
    if member is None and len(files) > 1:
        report_missing(parsed)
    if store is None:
        tables.meta.pop("_kept", None)
        tables.meta.pop("_shifts", None)
    memory.release()
    return tables


def _finish(parsed: list[dict], kept: list[int] | None, manifest: dict | None) -> RunTables:
    """The parsed files joined into the run: Kineto's attached and aligned, an elastic run's numbered on."""
    if any(p["rank_info"].get("format") == "kineto" for p in parsed):
        from viewer.kineto.attach import attach
        from viewer.kineto.clock import apply

        parsed = attach(parsed)   # beside our trace of the same rank: joins it
        apply(parsed)   # Kineto traces hold no clock offsets: estimate them from their collectives
    if manifest:
        elastic.continue_occurrences(parsed)
    tables = assemble(parsed, manifest)
    if kept is not None:
        tables.meta["_kept"] = kept
        tables.meta["_shifts"] = {p["rank_info"]["file"]: p["rank_info"]["shift_ns"] for p in parsed}
    return tables


def check_ranks(entries) -> None:
    """Refuse two files of one rank (rotation parts aside): ``entries`` = (rank, part, file[, generation])."""
    seen: dict = {}
    for r, part, f, *gen in entries:
        key = (r, *gen)
        if key in seen and (part is None or part in seen[key][1] or None in seen[key][1]):
            where = f" of generation {gen[0]}" if gen and gen[0] is not None else ""
            raise TraceError(f, f"rank {r}{where} also comes from {seen[key][0]} "
                             "(a run holds one trace per rank, plus its rotation parts)")
        seen.setdefault(key, (f, set()))[1].add(part)


def assemble(parsed: list[dict], elastic_manifest: dict | None = None) -> RunTables:
    """Each file's tables shifted onto the common axis and concatenated (``elastic_manifest``: an elastic run's)."""
    check_ranks((p["rank_info"]["rank"], p["meta"].get("part"), p["rank_info"]["file"],
                 p["rank_info"].get("generation")) for p in parsed)
    bases = [None if ri.get("base_epoch_ns") is None else ri["base_epoch_ns"] - (ri.get("clock_offset_ns") or 0)
             for ri in (p["rank_info"] for p in parsed)]
    known = [b for b in bases if b is not None]
    if known and elastic_manifest is not None:   # time 0: the job's start (the driver's first launch)
        known += [g["start_epoch_ns"] for g in elastic_manifest["generations"]]
    origin = min(known) if known else None
    shifts = [0 if base is None or origin is None else base - origin for base in bases]
    for p, shift in zip(parsed, shifts):
        p["rank_info"]["shift_ns"] = shift   # its tables' times + shift: the common axis (the store's views)
    out = {}
    for t, cols in _TIME_COLUMNS.items():
        dfs = []
        for p, shift in zip(parsed, shifts):
            df = p.pop(t)  # the per-file frame is ours: shift in place, then let it go
            if shift and len(df):
                for c in cols:
                    if c in df:
                        df[c] += shift
            dfs.append(df)
        out[t] = _concat_events(dfs) if t == "events" else frames.concat(t, dfs)
        del dfs
    for p, shift in zip(parsed, shifts):
        if p["rank_info"].get("last_ts_ns") is not None:
            p["rank_info"]["last_ts_ns"] += shift
    ranks = frames.build("ranks", {k: [p["rank_info"].get(k) for p in parsed]
                                   for k in frames.TABLES["ranks"]})
    meta = _run_meta(parsed, origin, shifts)
    if elastic_manifest is None:
        ranks = ranks.sort_values("rank", ignore_index=True)
    else:
        ranks = ranks.sort_values(["rank", "generation"], kind="stable", ignore_index=True)
        elastic.run_meta(meta, elastic_manifest, ranks)
    return RunTables(meta=meta, ranks=ranks, **out)


def _concat_events(dfs: list):
    """All ranks' events in (t_ns, rank) order, gathered column by column (one extra column at the peak)."""
    import numpy as np
    import pandas as pd

    given, dfs = dfs, [d for d in dfs if d is not None and len(d)]
    if len(dfs) <= 1 or any(list(d.columns) != list(dfs[0].columns) for d in dfs):
        ev = frames.concat("events", dfs)
        if ev["rank"].nunique() > 1:
            ev = ev.sort_values(["t_ns", "rank"], kind="stable", ignore_index=True)
        return ev
    rank = np.concatenate([d["rank"].to_numpy() for d in dfs])
    order = None   # one rank (its rotation parts): kept in file order
    if (rank != rank[0]).any():
        order = np.lexsort((rank, np.concatenate([d["t_ns"].to_numpy() for d in dfs])))
    del rank
    names = list(dfs[0].columns)
    # columns by name (popping a frame's column rebuilds its blocks), the frames let go: each column is freed
    # once gathered
    dfs = [dict(d.items()) for d in dfs]
    given.clear()
    cols = {}
    for c in names:
        col = pd.concat(frames.same_categories([d.pop(c) for d in dfs]), ignore_index=True)
        cols[c] = col if order is None else pd.Series(_take(col.array, order), name=c, copy=False)
        del col
        memory.release()   # the per-rank pieces just freed: give them back before the next column
    return frames.conform("events", pd.DataFrame(cols, copy=False))


def _take(arr, order):
    """``arr`` reordered by ``order``; Arrow strings as one chunk first (half the cost of taking from many)."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    if isinstance(arr, pd.arrays.ArrowStringArray):
        return pd.arrays.ArrowStringArray(pa.chunked_array(pa.array(arr)).combine_chunks().take(order))
    if isinstance(arr, pd.arrays.NumpyExtensionArray):
        return np.asarray(arr).take(order)
    return arr.take(order)


def _run_meta(parsed, origin, shifts) -> dict:
    by_rank = sorted(parsed, key=lambda p: p["rank_info"]["rank"])
    first = by_rank[0]["meta"] if by_rank else {}
    sizes = [p["rank_info"].get("size") for p in parsed if p["rank_info"].get("size")]
    meta = {k: v for k, v in first.items() if not k.startswith("_") and k not in _PER_RANK_KEYS}
    last = [p["meta"].get("_last_local_ns", 0) + shift for p, shift in zip(parsed, shifts)]
    meta.update({
        "origin_epoch_ns": origin,
        "size": max(sizes) if sizes else len(parsed),
        "ranks_loaded": [p["rank_info"]["rank"] for p in by_rank],
        "fusion_threshold": first.get("fusion_threshold"),
        "cycle_time_ms": first.get("cycle_time_ms") if isinstance(first.get("cycle_time_ms"), (int, float))
        and not isinstance(first.get("cycle_time_ms"), bool) else None,
        "backend": by_rank[0]["rank_info"].get("backend") if by_rank else None,
        "files": [p["rank_info"]["file"] for p in by_rank],
        "format": by_rank[0]["rank_info"]["format"] if by_rank else None,
        "truncated_ranks": [p["rank_info"]["rank"] for p in by_rank if p["rank_info"].get("truncated")],
        "skipped": [{"file": p["rank_info"]["file"], "rank": p["rank_info"]["rank"], **s}
                    for p in by_rank for s in p["meta"].get("_skipped") or []],
        "end_ns": max(last) if last else 0,
    })
    return meta

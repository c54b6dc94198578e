"""A run's tables as DuckDB views over its store (``viewer/cache.py``): SQL over the run's Parquet tables, out
of core, as ``viewer.Run`` has them; no table is loaded into this process (docs/QUERY.md)."""
from __future__ import annotations

from pathlib import Path

from viewer import cache as _cache


def store_of(paths, cache_dir=None) -> Path:
    """The run's store entry, built first (a full load) when it is absent or stale."""
    from viewer.loader import find_traces, load_run
    from viewer.ringscope import elastic

    manifest = Path(paths) / elastic.MANIFEST if elastic.is_elastic(paths) else None
    files = (list(elastic.Members(paths, elastic.read_manifest(paths)).generation) if manifest
             else find_traces(paths))
    entry = _cache.entry_dir(files, manifest, cache_dir)
    if not (entry / _cache.RUN_INFO).exists():
        load_run(paths, cache_dir=cache_dir)
        if not (entry / _cache.RUN_INFO).exists():
            from viewer.errors import TraceError

            raise TraceError(paths, f"the run's store could not be written in {entry.parent}")
    return entry


def connect(entry: Path):
    """A DuckDB connection whose views ``events``, ``tensor_ops``, ``fused_ops``, ``readiness``, ``cycles`` and
    ``ranks`` are the run's tables in ``entry``, as ``viewer.Run`` has them."""
    import duckdb

    con = duckdb.connect()
    for t in _cache.RUN_TABLES:
        con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_parquet('{_quote(str(entry / f'run.{t}.parquet'))}')")
    return con


def _quote(s: str) -> str:
    return s.replace("'", "''")

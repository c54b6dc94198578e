"""A run's tables as DuckDB views over its store (``viewer/cache.py``): SQL over the Parquet files, out of core,
each file's times put on the run's common axis; no table is loaded into this process (docs/QUERY.md)."""
from __future__ import annotations

import json
from pathlib import Path

from viewer import cache as _cache
from viewer.schema import TABLES

# the time columns of each table (the loader's): each file's shift onto the common axis is added to them
_TIMES = {"events": ("t_ns", "launch_ns"), "tensor_ops": ("submit_ns", "negotiated_ns", "start_ns", "done_ns",
                                                          "end_ns"),
          "fused_ops": ("start_ns", "end_ns"), "readiness": ("ready_ns",), "cycles": ("start_ns", "end_ns")}
_SQL_TYPES = {"int32": "INTEGER", "int64": "BIGINT", "Int64": "BIGINT", "string": "VARCHAR", "bool": "BOOLEAN",
              "float64": "DOUBLE", "category": "VARCHAR", "object": "VARCHAR"}


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
    ``ranks`` are the run's tables in ``entry``."""
    import duckdb

    run = json.loads((entry / _cache.RUN_INFO).read_text())
    con = duckdb.connect()
    stems = {i: str(entry / _cache.rank_stem(i)) for i in run["kept"]}
    infos = {i: json.loads(Path(stem + ".json").read_text()) for i, stem in stems.items()}
    con.execute("CREATE TEMP TABLE _shift (stem VARCHAR, shift_ns BIGINT)")
    con.executemany("INSERT INTO _shift VALUES (?, ?)",
                    [(stem, run["shifts"].get(infos[i]["rank_info"]["file"], 0)) for i, stem in stems.items()])
    for t, times in _TIMES.items():
        glob = str(entry / f"rank-*.{t}.parquet")
        cols = {r[0] for r in con.execute(f"DESCRIBE SELECT * FROM read_parquet('{_quote(glob)}')").fetchall()}
        shifted = ", ".join(f"p.{c} + s.shift_ns AS {c}" for c in times if c in cols)
        con.execute(f"CREATE VIEW {t} AS SELECT p.* EXCLUDE (filename){f' REPLACE ({shifted})' if shifted else ''} "
                    f"FROM read_parquet('{_quote(glob)}', filename = true, union_by_name = true) p "
                    f"JOIN _shift s ON s.stem || '.{t}.parquet' = p.filename")
    ranks = TABLES["ranks"]
    con.execute("CREATE TEMP TABLE ranks (" + ", ".join(f"{c} {_SQL_TYPES[d]}" for c, d in ranks.items()) + ")")
    rows = []
    for i in stems:
        ri = dict(infos[i]["rank_info"])
        if ri.get("last_ts_ns") is not None:
            ri["last_ts_ns"] += run["shifts"].get(ri["file"], 0)
        rows.append([ri.get(c) for c in ranks])
    rows.sort(key=lambda r: (r[0], r[list(ranks).index("generation")] or 0))
    con.executemany(f"INSERT INTO ranks VALUES ({', '.join('?' * len(ranks))})", rows)
    return con


def _quote(s: str) -> str:
    return s.replace("'", "''")

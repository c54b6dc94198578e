"""Parquet cache of per-file tables, keyed by the file's path, size and mtime.

Location: ``cache_dir`` argument, else ``$RINGSCOPE_CACHE_DIR``, else ``.ringscope-cache/`` next to the
trace when that directory is writable, else ``~/.cache/ringscope``.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from viewer.io.chrome_json import file_signature

# 9: tensor_ops.priority, fused_ops.priority; 8: phases, regions and counters carry their STEP span's step
CACHE_VERSION = 9
CACHE_DIRNAME = ".ringscope-cache"  # matches .gitignore
_TABLES = ("events", "tensor_ops", "fused_ops", "readiness", "cycles")


def cache_root(trace: Path, cache_dir=None) -> Path:
    """Directory holding the cache entries for ``trace``."""
    if cache_dir:
        return Path(cache_dir)
    env = os.environ.get("RINGSCOPE_CACHE_DIR")
    if env:
        return Path(env)
    here = trace.resolve().parent
    if os.access(here, os.W_OK):
        return here / CACHE_DIRNAME
    return Path.home() / ".cache" / "ringscope"


def _prefix(trace: Path) -> str:
    """Entry-name prefix for one trace path (its versions share it, other files never do)."""
    return trace.name + "-" + hashlib.sha1(str(trace.resolve()).encode()).hexdigest()[:10] + "-"


def _key(trace: Path) -> str:
    size, mtime = file_signature(trace)
    raw = f"{CACHE_VERSION}|{trace.resolve()}|{size}|{mtime}"
    return _prefix(trace) + hashlib.sha1(raw.encode()).hexdigest()[:16]


def load(trace: Path, cache_dir=None):
    """The cached parse of ``trace`` or None (stale, absent or unreadable entries count as absent)."""
    entry = cache_root(trace, cache_dir) / _key(trace)
    info_file = entry / "info.json"
    if not info_file.exists():
        return None
    try:
        import pyarrow.parquet as pq

        from viewer import frames

        out = json.loads(info_file.read_text())
        for t in _TABLES:
            # one block per column: reordering columns to the schema then copies nothing
            df = pq.read_table(entry / f"{t}.parquet").to_pandas(split_blocks=True, self_destruct=True)
            if t == "fused_ops" and "tensors" in df:
                df["tensors"] = [list(x) if x is not None else [] for x in df["tensors"]]
            out[t] = frames.conform(t, df)
        return out
    except Exception:  # a broken cache entry is just a miss
        return None


def store(trace: Path, parsed: dict, cache_dir=None) -> None:
    """Write ``parsed`` for ``trace``; failures (read-only disk, ...) are ignored."""
    root = cache_root(trace, cache_dir)
    entry = root / _key(trace)
    tmp = root / (entry.name + f".tmp{os.getpid()}")
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq

        tmp.mkdir(parents=True, exist_ok=True)
        for t in _TABLES:
            # whole tables are read back: no statistics; plain strings write and read faster here
            pq.write_table(pa.Table.from_pandas(parsed[t], preserve_index=False), tmp / f"{t}.parquet",
                           compression="snappy", write_statistics=False, use_dictionary=False)
        info = {"rank_info": parsed["rank_info"], "meta": parsed["meta"]}
        (tmp / "info.json").write_text(json.dumps(info, default=str))
        _drop_stale(root, _prefix(trace))
        if entry.exists():
            shutil.rmtree(entry, ignore_errors=True)
        tmp.rename(entry)
    except Exception:
        shutil.rmtree(tmp, ignore_errors=True)


def _drop_stale(root: Path, prefix: str) -> None:
    for old in root.glob(prefix + "*"):
        if old.is_dir() and ".tmp" not in old.name:
            shutil.rmtree(old, ignore_errors=True)

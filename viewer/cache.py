"""Cache of a loaded run's tables (Arrow IPC, lz4), keyed by every trace's path, size and mtime, with its warnings."""
from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import json
import os
import shutil
import warnings
from pathlib import Path

import pyarrow as pa

from viewer import frames
from viewer.io.chrome_json import file_signature
from viewer.schema import RunTables

CACHE_DIRNAME = ".ringscope-cache"  # matches .gitignore
_TABLES = ("events", "tensor_ops", "fused_ops", "readiness", "cycles", "ranks")


@functools.cache
def cache_version() -> str:
    """A digest of the code that makes the tables: an entry other code wrote is never read back."""
    import tracer.vocab

    root = Path(__file__).parent
    h = hashlib.sha1()
    for f in sorted([*root.rglob("*.py"), *root.rglob("*.so"), Path(tracer.vocab.__file__)]):
        h.update(f.read_bytes())
    return h.hexdigest()[:12]


def cache_root(trace: Path, cache_dir=None) -> Path:
    """Directory holding the cache entries for ``trace`` (a run's first file)."""
    if cache_dir:
        return Path(cache_dir)
    env = os.environ.get("RINGSCOPE_CACHE_DIR")
    if env:
        return Path(env)
    here = trace.resolve().parent
    if os.access(here, os.W_OK):
        return here / CACHE_DIRNAME
    return Path.home() / ".cache" / "ringscope"


def _prefix(files: list[Path]) -> str:
    """Entry-name prefix for one list of trace paths (its versions share it, other lists never do)."""
    paths = "\n".join(str(f.resolve()) for f in files)
    return files[0].name + "-" + hashlib.sha1(paths.encode()).hexdigest()[:10] + "-"


def _key(files: list[Path], manifest: Path | None) -> str:
    sigs = [f"{f.resolve()}|{size}|{mtime}" for f in [*files, *([manifest] if manifest else [])]
            for size, mtime in [file_signature(f)]]
    raw = f"{cache_version()}|" + "\n".join(sigs)
    return _prefix(files) + hashlib.sha1(raw.encode()).hexdigest()[:16]


def load(files: list[Path], manifest: Path | None = None, cache_dir=None):
    """The cached :class:`RunTables` of these files, its warnings given again; None when stale or absent."""
    entry = cache_root(files[0], cache_dir) / _key(files, manifest)
    info_file = entry / "info.json"
    if not info_file.exists():
        return None
    try:
        info = json.loads(info_file.read_text())
        tables = {}
        for t in _TABLES:
            # one block per column: reordering columns to the schema then copies nothing; no threads
            # (see store)
            with pa.ipc.open_file(entry / f"{t}.arrow", options=pa.ipc.IpcReadOptions(use_threads=False)) as f:
                df = f.read_all().to_pandas(split_blocks=True, self_destruct=True)
            if t == "fused_ops" and "tensors" in df:
                df["tensors"] = [list(x) if x is not None else [] for x in df["tensors"]]
            tables[t] = frames.conform(t, df)
        warned = [(_category(w["category"]), w["message"], w["filename"], w["lineno"]) for w in info["warnings"]]
    except Exception:  # a broken cache entry is just a miss
        return None
    for category, message, filename, lineno in warned:
        warnings.warn_explicit(message, category, filename, lineno)
    return RunTables(meta=info["meta"], **tables)


@contextlib.contextmanager
def recording():
    """Record the warnings given inside and give them on, also when the load fails."""
    caught: list = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield caught
    finally:
        for w in caught:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def store(files: list[Path], tables, caught: list, manifest: Path | None = None, cache_dir=None) -> None:
    """Write ``tables`` and the warnings their load gave; a failure leaves no entry."""
    root = cache_root(files[0], cache_dir)
    entry = root / _key(files, manifest)
    tmp = root / (entry.name + f".tmp{os.getpid()}")
    try:
        info = {"meta": tables.meta, "warnings": [
            {"category": f"{w.category.__module__}:{w.category.__qualname__}", "message": str(w.message),
             "filename": w.filename, "lineno": w.lineno} for w in caught]}
        text = json.dumps(info)
        if json.loads(text) != info:
            return
        tmp.mkdir(parents=True, exist_ok=True)
        # no threads: on a few busy cores they cost more CPU than they save wall time, and the memory they
        # free stays in their own malloc arenas (~100 MB held after writing 196 MB of trace's tables)
        options = pa.ipc.IpcWriteOptions(compression="lz4", use_threads=False)
        for t in _TABLES:
            table = pa.Table.from_pandas(getattr(tables, t), preserve_index=False, nthreads=1)
            with pa.ipc.new_file(tmp / f"{t}.arrow", table.schema, options=options) as f:
                f.write_table(table, max_chunksize=1 << 16)
            del table
        (tmp / "info.json").write_text(text)
        for old in root.glob(_prefix(files) + "*"):   # this list's entries for older versions of its files
            if old.is_dir() and ".tmp" not in old.name:
                shutil.rmtree(old, ignore_errors=True)
        if entry.exists():
            shutil.rmtree(entry, ignore_errors=True)
        tmp.rename(entry)
    except Exception:
        shutil.rmtree(tmp, ignore_errors=True)


def _category(name: str) -> type[Warning]:
    """The warning class ``module:qualname`` names (the viewer's own, or a builtin one)."""
    module, _, qualname = name.partition(":")
    if module != "builtins" and not module.startswith("viewer."):
        raise ValueError(name)
    cls = getattr(importlib.import_module(module), qualname)
    if not (isinstance(cls, type) and issubclass(cls, Warning)):
        raise ValueError(name)
    return cls


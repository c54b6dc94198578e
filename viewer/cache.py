"""The run's columnar store, which is its parse cache: each trace file's tables (local times, as parsed) as
Parquet, ``rank-NNNNN.<table>.parquet``, with its ``rank-NNNNN.json`` (rank info, metadata, the warnings its
parse gave) and the run's ``run.json`` beside them. An entry is keyed on every trace's path, size and mtime
and a digest of the code that makes the tables; it is written to a temporary directory and renamed into
place whole, so a reader never sees half of one and two processes building it at once both finish."""
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

from viewer.io.chrome_json import file_signature

CACHE_DIRNAME = ".ringscope-cache"  # matches .gitignore
TABLES = ("events", "tensor_ops", "fused_ops", "readiness", "cycles")   # a file's tables (``ranks``: the run's)
RUN_INFO = "run.json"


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
    """Directory holding the store entries for ``trace`` (a run's first file)."""
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


def entry_dir(files: list[Path], manifest: Path | None = None, cache_dir=None) -> Path:
    """Where the store of these files (as they are now) lives, built or not."""
    return cache_root(files[0], cache_dir) / _key(files, manifest)


def rank_stem(i: int) -> str:
    """The name stem of the ``i``-th trace file's tables and info in an entry."""
    return f"rank-{i:05d}"


# ---- one file's tables -----------------------------------------------------------------------------

def write_rank(d: Path, i: int, parsed: dict) -> None:
    """Write the ``i``-th file's parsed tables and info into ``d`` (no info when JSON would change it: then
    :func:`commit` stores nothing)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for t in TABLES:
        table = pa.Table.from_pandas(parsed[t], preserve_index=False, nthreads=1)
        pq.write_table(table, d / f"{rank_stem(i)}.{t}.parquet", compression="lz4", use_dictionary=True,
                       row_group_size=1 << 17)
        del table
    info = {"rank_info": parsed["rank_info"], "meta": parsed["meta"]}
    try:
        text = json.dumps(info, default=_not_json)
    except (_NotJson, ValueError):
        return
    if json.loads(text) == info:
        (d / f"{rank_stem(i)}.json").write_text(text)


def read_rank(d: Path, i: int, info: dict | None = None) -> dict:
    """The ``i``-th file's parsed tables from ``d``, as its parse gave them (``info``: its info, when known)."""
    import pandas as pd
    import pyarrow.parquet as pq

    if info is None:
        info = json.loads((d / f"{rank_stem(i)}.json").read_text())
    out: dict = {"rank_info": info["rank_info"], "meta": info["meta"]}
    for t in TABLES:
        # one block per column: reordering columns to the schema then copies nothing; no threads (see write)
        df = pq.read_table(d / f"{rank_stem(i)}.{t}.parquet", use_threads=False).to_pandas(
            split_blocks=True, self_destruct=True)
        for c in df.columns:   # Parquet keeps no type for no categories: the parsers' is text
            if isinstance(df[c].dtype, pd.CategoricalDtype) and not len(df[c].cat.categories):
                df[c] = df[c].cat.set_categories(pd.Index([], dtype="str"))
        if t == "fused_ops" and "tensors" in df:
            df["tensors"] = [list(x) if x is not None else [] for x in df["tensors"]]
        out[t] = df
    return out


def replay(caught: list[dict]) -> None:
    """Give again the warnings :func:`recorded` made."""
    for w in caught:
        warnings.warn_explicit(w["message"], _category(w["category"]), w["filename"], w["lineno"])


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


def recorded(w) -> dict:
    """A caught warning as JSON (its class by name)."""
    return {"category": f"{w.category.__module__}:{w.category.__qualname__}", "message": str(w.message),
            "filename": w.filename, "lineno": w.lineno}


class _NotJson(TypeError):
    """A value JSON would not give back as it is: the entry is not stored."""


def _not_json(o):
    raise _NotJson(type(o).__name__)


# ---- a run's entry ---------------------------------------------------------------------------------

def load(files: list[Path], manifest: Path | None = None, cache_dir=None) -> tuple[list[dict], dict] | None:
    """The stored parse of these files (each kept file's tables and info, in file order) and the run's info;
    None when stale, absent or unreadable."""
    entry = entry_dir(files, manifest, cache_dir)
    try:
        run = json.loads((entry / RUN_INFO).read_text())
        parsed = [read_rank(entry, i) for i in run["kept"]]
        for w in run["warnings"]:
            _category(w["category"])
    except Exception:  # a broken or absent entry is just a miss
        return None
    return parsed, run


def building(files: list[Path], manifest: Path | None = None, cache_dir=None) -> Path | None:
    """A fresh temporary directory to build this run's entry in; None when the store cannot be written."""
    root = cache_root(files[0], cache_dir)
    tmp = root / (_key(files, manifest) + f".tmp{os.getpid()}")
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    except OSError:
        return None
    return tmp


def commit(tmp: Path, files: list[Path], run: dict, manifest: Path | None = None, cache_dir=None) -> None:
    """Make ``tmp`` the run's entry (with ``run``: kept files, shifts, warnings); never leaves a partial one."""
    entry = entry_dir(files, manifest, cache_dir)
    try:
        text = json.dumps(run, default=_not_json)
        if json.loads(text) != run:   # e.g. a tuple in the run's meta
            raise _NotJson("run info")
        (tmp / RUN_INFO).write_text(text)
        for i in run["kept"]:   # a file whose info JSON would change was not stored
            if not (tmp / f"{rank_stem(i)}.json").exists():
                raise _NotJson(rank_stem(i))
        try:
            tmp.rename(entry)
        except OSError:   # another process built it first: theirs is the same
            shutil.rmtree(tmp, ignore_errors=True)
            return
        for old in entry.parent.glob(_prefix(files) + "*"):   # this list's entries for older versions of its files
            if old.is_dir() and old != entry and ".tmp" not in old.name:
                shutil.rmtree(old, ignore_errors=True)
    except Exception:
        shutil.rmtree(tmp, ignore_errors=True)


def discard(tmp: Path | None) -> None:
    """Remove a build directory that will not become an entry."""
    if tmp is not None:
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

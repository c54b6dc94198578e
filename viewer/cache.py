"""The run's columnar store, which is its parse cache: each trace file's tables (local times, as parsed) as
Parquet, ``rank-NNNNN.<table>.parquet``, with its ``rank-NNNNN.json`` (rank info, metadata, the warnings its
parse gave); the run's tables as the loader made them (aligned on one time axis, merged), ``run.<table>.parquet``,
which a hit reads back as they are (the events when first used, see :class:`viewer.schema.StoredTables`); and the
run's ``run.json`` (the files kept, their shifts, the warnings, the run's metadata, its tables' column types and
its events' extent). An entry is keyed on every trace's path, size and mtime
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
from typing import TYPE_CHECKING

from viewer.io.chrome_json import file_signature
from viewer.schema import OP_ROWS_FORMATS, OP_ROWS_THREAD, StoredTables, extent

if TYPE_CHECKING:
    import pandas as pd

CACHE_DIRNAME = ".ringscope-cache"  # matches .gitignore
TABLES = ("events", "tensor_ops", "fused_ops", "readiness", "cycles")   # a file's tables (``ranks``: the run's)
RUN_TABLES = (*TABLES, "ranks")
_SLICE = 1 << 20   # rows of a run table written at once (one row group)
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


# ---- the run's tables ------------------------------------------------------------------------------

def write_tables(d: Path, tables: dict) -> dict:
    """Write the run's tables (``{name: DataFrame}``) into ``d``; each one's column types, which
    :func:`read_tables` needs (a categorical's categories among them: Parquet keeps only those used)."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = {}
    for t, df in tables.items():
        spec = {}
        for c in df.columns:
            dtype = df[c].dtype
            if isinstance(dtype, pd.CategoricalDtype):
                spec[c] = {"categories": dtype.categories.tolist(), "of": str(dtype.categories.dtype)}
            elif str(dtype) == "object" and (t, c) != ("fused_ops", "tensors"):
                raise _NotJson(f"{t}.{c}")   # a column of Python objects Parquet may not give back as they are
            else:
                spec[c] = str(dtype)
        columns[t] = spec
        schema = pa.Schema.from_pandas(df.head(_SLICE), preserve_index=False)
        if "tensors" in schema.names:   # lists of names, also where the first slice's are all empty
            schema = schema.set(schema.get_field_index("tensors"), pa.field("tensors", pa.list_(pa.string())))
        with pq.ParquetWriter(d / f"run.{t}.parquet", schema, compression="lz4", use_dictionary=True) as w:
            for i in range(0, max(len(df), 1), _SLICE):   # a slice at a time: no second copy of a big table
                w.write_table(pa.Table.from_pandas(df.iloc[i:i + _SLICE], schema=schema, preserve_index=False))
    return columns


def read_tables(d: Path, columns: dict) -> dict:
    """The run's tables from ``d``, each column of the type :func:`write_tables` noted."""
    return {t: read_table(d, t, spec) for t, spec in columns.items()}


def read_table(d: Path, t: str, spec: dict, filters: list | None = None) -> pd.DataFrame:
    """The run's table ``t`` from ``d`` (its rows that pass ``filters``, pyarrow's), typed as ``spec`` notes."""
    import pandas as pd
    import pyarrow.parquet as pq

    df = pq.read_table(d / f"run.{t}.parquet", filters=filters).to_pandas(split_blocks=True, self_destruct=True)
    for c, dtype in spec.items():
        if isinstance(dtype, dict):
            cats = pd.Index(dtype["categories"], dtype=dtype["of"])
            got = df[c].dtype
            if not (isinstance(got, pd.CategoricalDtype) and got.categories.equals(cats)
                    and got.categories.dtype == cats.dtype):
                df[c] = df[c].astype(pd.CategoricalDtype(cats))
        elif c == "tensors" and t == "fused_ops":
            df[c] = [list(x) if x is not None else [] for x in df[c]]
        elif str(df[c].dtype) != dtype:
            df[c] = df[c].astype(dtype)
    return df


def stored_tables(d: Path, run: dict) -> StoredTables:
    """The run's tables from entry ``d``, its events not read until used (then whole, or each op's rows left
    out where the run's formats rebuilt them from its tensor ops)."""
    import pyarrow.parquet as pq

    columns = run["columns"]
    pq.read_metadata(d / "run.events.parquet")   # there and whole: else a miss now, not an error when read
    tables = read_tables(d, {t: spec for t, spec in columns.items() if t != "events"})
    formats = {str(f) for f in tables["ranks"]["format"].dropna()}
    # no op rows to leave out (a Kineto run's): the part is the whole, read once when first used
    part = (functools.partial(read_table, d, "events", columns["events"], [("thread", "!=", OP_ROWS_THREAD)])
            if formats and formats <= OP_ROWS_FORMATS else None)
    return StoredTables.unread(functools.partial(read_table, d, "events", columns["events"]), part,
                               tuple(run["events_extent"]), meta=run["meta"], **tables)


# ---- a run's entry ---------------------------------------------------------------------------------

def load(files: list[Path], manifest: Path | None = None, cache_dir=None) -> tuple[StoredTables, dict] | None:
    """The stored run of these files (its tables) and the run's info (``meta`` among it); None when stale,
    absent or unreadable."""
    entry = entry_dir(files, manifest, cache_dir)
    try:
        run = json.loads((entry / RUN_INFO).read_text())
        for w in run["warnings"]:
            _category(w["category"])
        tables = stored_tables(entry, run)
    except Exception:  # a broken or absent entry is just a miss
        return None
    return tables, run


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


def commit(tmp: Path, files: list[Path], run: dict, manifest: Path | None = None, cache_dir=None,
           tables: dict | None = None) -> None:
    """Make ``tmp`` the run's entry (with ``run``: kept files, shifts, warnings, the run's meta; ``tables``: the
    run's, written first); never leaves a partial one."""
    entry = entry_dir(files, manifest, cache_dir)
    try:
        if tables is not None:
            run = {**run, "columns": write_tables(tmp, tables), "events_extent": list(extent(tables["events"]))}
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

"""The C scanner's event columns in numpy (strings as int32 codes, -1 = null), and pandas columns built from them."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

_READ = 1   # the scanner's status of a value that was there with the asked type


class Columns:
    """The event columns :func:`viewer.io._eventscan.scan` returned, keeping the rows of the mask ``keep``."""

    def __init__(self, scanned: dict, kinds: dict, keep=None):
        self._c = scanned["columns"]
        self._kinds = kinds
        self._keep = keep
        self.n = scanned["rows"] if keep is None else int(np.count_nonzero(keep))
        self.starts = self._rows(np.frombuffer(scanned["start"], dtype=np.int64))   # each row's byte offset
        self._memo: dict = {}
        self.shutdown = None   # the SHUTDOWN event's args, read apart (see viewer.ringscope.reader)

    def _rows(self, a):
        return a if self._keep is None else a[self._keep]

    def _status(self, name: str):
        return self._rows(np.frombuffer(self._c[name][0], dtype=np.uint8))

    def codes(self, name: str):
        """``(codes, values)``: int32 code per row (-1 = null or absent) and the strings they index."""
        if name not in self._memo:
            _, raw, values = self._c[name]
            self._memo[name] = distinct(self._rows(np.frombuffer(raw, dtype=np.int32)), values)
        return self._memo[name]

    def floats(self, name: str, fill=np.nan):
        """float64 per row, ``fill`` where null or absent."""
        dtype = np.int64 if self._kinds[name] == "i" else np.float64
        values = self._rows(np.frombuffer(self._c[name][1], dtype=dtype))
        return np.where(self._status(name) == _READ, values, fill).astype("float64")

    def ints(self, name: str, fill: int = -1):
        """``(values, valid)``: int64 per row (``fill`` where null) and the non-null mask."""
        ok = self._status(name) == _READ
        return np.where(ok, self._rows(np.frombuffer(self._c[name][1], dtype=np.int64)), fill), ok

    def list_items(self, name: str, rows):
        """A list column at ``rows``, flattened: ``(codes, values, parent)``, parent: its position in ``rows``."""
        if not len(rows):
            return np.zeros(0, dtype=np.int32), [], np.zeros(0, dtype="int64")
        st, ends, items, values = self._c[name]
        ends = np.frombuffer(ends, dtype=np.int64)
        begins = np.r_[0, ends[:-1]]
        if self._keep is not None:
            ends, begins = ends[self._keep], begins[self._keep]
        rows = np.asarray(rows, dtype="int64")
        lo, hi = begins[rows], ends[rows]
        counts = hi - lo
        parent = np.repeat(np.arange(len(rows), dtype="int64"), counts)
        at = np.arange(int(counts.sum()), dtype="int64") - np.repeat(np.cumsum(counts) - counts, counts) \
            + np.repeat(lo, counts)
        codes, uniq = distinct(np.frombuffer(items, dtype=np.int32)[at], values)
        return codes, uniq, parent

    def listed(self, name: str, rows, values: list):
        """:meth:`list_items` as ``(codes, parent)``, the codes into ``values`` (-1 when not there)."""
        codes, uniq, parent = self.list_items(name, rows)
        where = {v: i for i, v in enumerate(values)}
        remap = np.array([where.get(v, -1) for v in uniq] + [-1], dtype="int64")
        return remap[codes], parent

    def lists(self, name: str, rows) -> list:
        """A list column at ``rows`` as Python lists (None where null)."""
        rows = np.asarray(rows, dtype="int64")
        codes, uniq, parent = self.list_items(name, rows)
        items = np.array(uniq, dtype=object)[codes].tolist() if len(codes) else []
        bounds = np.r_[0, np.cumsum(np.bincount(parent, minlength=len(rows)))].tolist()
        ok = (self._status(name)[rows] == _READ).tolist()
        return [items[a:b] if k else None for a, b, k in zip(bounds[:-1], bounds[1:], ok)]


def distinct(codes, values: list):
    """``(codes, values)`` with repeated values (aliases, escapes) folded into one."""
    if len(set(values)) == len(values):
        return codes, list(values)
    (codes,), values = unify((codes, values))
    return codes, values


def lut(values: list, pred) -> np.ndarray:
    """Boolean table over codes: ``lut(values, pred)[codes]`` is ``pred(value)`` per row (False for null)."""
    return np.array([bool(pred(v)) for v in values] + [False], dtype=bool)


def with_default(codes, values, default):
    """Codes with nulls pointing at ``default`` (appended to the values)."""
    return np.where(codes < 0, len(values), codes).astype(np.int32), list(values) + [default]


def constant(n: int, value):
    """``n`` rows of one string."""
    return np.zeros(n, dtype=np.int32), [value]


def unify(*parts):
    """``(codes, values)`` columns recoded into one list of distinct values: ``([codes, ...], values)``."""
    index: dict = {}
    out = []
    for codes, values in parts:
        remap = np.array([index.setdefault(v, len(index)) for v in values] + [-1], dtype=np.int32)
        out.append(remap[codes])
    return out, list(index)


def _joined(parts, order):
    out, values = unify(*parts)
    codes = np.concatenate(out) if out else np.zeros(0, dtype=np.int32)
    return (codes if order is None else codes[order]), values


def strings(parts, order=None):
    """A pandas ``string`` array of ``(codes, values)`` parts, concatenated (then taken at ``order``)."""
    codes, values = _joined(parts, order)
    dictionary = pa.array(values, type=pa.large_string())
    arr = pa.DictionaryArray.from_arrays(pa.array(codes, mask=codes < 0), dictionary)
    return pd.arrays.ArrowStringArray(arr.cast(pa.large_string()))


def categories(parts, order=None):
    """A sorted pandas ``Categorical`` of ``(codes, values)`` parts, like :func:`strings`."""
    codes, values = _joined(parts, order)
    used = np.flatnonzero(np.bincount(codes[codes >= 0], minlength=len(values)))
    kept = [values[i] for i in used.tolist()]
    by_text = np.argsort(np.array(kept, dtype=object)) if kept else np.zeros(0, dtype=np.int64)
    remap = np.full(len(values) + 1, -1, dtype=np.int32)
    remap[used[by_text]] = np.arange(len(kept), dtype=np.int32)
    return pd.Categorical.from_codes(remap[codes], validate=False,
                                     categories=pd.Index([kept[i] for i in by_text.tolist()], dtype="str"))


def int_na(values, valid):
    """A pandas ``Int64`` array (NA where not ``valid``)."""
    return pd.arrays.IntegerArray(np.asarray(values, dtype="int64"), ~np.asarray(valid, dtype=bool))


def ns(us):
    """Microseconds (float) to integer nanoseconds, NaN as 0."""
    return np.rint(np.nan_to_num(np.asarray(us, dtype="float64"), nan=0.0) * 1000).astype("int64")


def cumcount(keys) -> np.ndarray:
    """For each row, how many earlier rows share its key."""
    keys = np.asarray(keys)
    return pd.Series(keys).groupby(keys).cumcount().to_numpy("int64")


def dense(keys) -> np.ndarray:
    """One small int64 group id per row (equal keys, equal ids)."""
    return np.unique(np.asarray(keys), return_inverse=True)[1].reshape(-1).astype("int64")


def lookup(keys, queries) -> np.ndarray:
    """Index of the first row of ``keys`` equal to each query, -1 where none."""
    keys = np.asarray(keys)
    queries = np.asarray(queries)
    if not len(keys) or not len(queries):
        return np.full(len(queries), -1, dtype="int64")
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    pos = np.minimum(np.searchsorted(sk, queries, side="left"), len(sk) - 1)
    return np.where(sk[pos] == queries, order[pos], -1)

"""numpy access to one trace's event columns (Arrow), and pandas columns built back from them.

String columns are read as dictionary codes (int32 per row, -1 = null) plus the distinct strings they
index, so selecting, comparing and grouping rows works on small integers, and strings are materialised
once, for the output tables only.
"""
from __future__ import annotations

import numpy as np


class Columns:
    """The flattened Arrow table of one trace's events (``args.step``, ``id2.local``, ...)."""

    def __init__(self, table):
        self._t = table
        self.n = table.num_rows
        self._memo = {}
        self.shutdown = None   # the SHUTDOWN event's args, read apart (see viewer.io.ringscope)

    def has(self, name: str) -> bool:
        """The column was read."""
        return name in self._t.column_names

    def _col(self, name):
        col = self._t.column(name)
        return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()

    def codes(self, name: str):
        """``(codes, values)``: int32 code per row (-1 = null or absent) and the strings they index."""
        hit = self._memo.get(name)
        if hit is None:
            if not self.has(name):
                hit = (np.full(self.n, -1, dtype=np.int32), [])
            else:
                hit = encode(self._col(name))
            self._memo[name] = hit
        return hit

    def floats(self, name: str, fill=np.nan):
        """float64 per row, ``fill`` where null."""
        if not self.has(name):
            return np.full(self.n, fill, dtype="float64")
        out = np.asarray(self._col(name).to_numpy(zero_copy_only=False), dtype="float64")
        if fill == fill:  # nulls arrive as NaN
            out = np.where(np.isnan(out), fill, out)
        return out

    def ints(self, name: str, fill: int = -1):
        """``(values, valid)``: int64 per row (``fill`` where null) and the non-null mask."""
        if not self.has(name):
            return np.full(self.n, fill, dtype="int64"), np.zeros(self.n, dtype=bool)
        col = self._col(name)
        if not col.null_count:
            return np.asarray(col.to_numpy(), dtype="int64"), np.ones(self.n, dtype=bool)
        import pyarrow.compute as pc

        return (np.asarray(pc.fill_null(col, fill).to_numpy(), dtype="int64"),
                np.asarray(col.is_valid().to_numpy(zero_copy_only=False), dtype=bool))

    def _flattened(self, name: str, rows):
        """The items of a list column at ``rows`` as one Arrow array, and the position in ``rows``
        each came from (None when the column is missing or ``rows`` is empty)."""
        import pyarrow.compute as pc

        if not self.has(name) or not len(rows):
            return None
        lists = self._t.column(name).take(np.asarray(rows, dtype="int64")).combine_chunks()
        return pc.list_flatten(lists), np.asarray(pc.list_parent_indices(lists).to_numpy(), dtype="int64")

    def listed(self, name: str, rows, values: list):
        """The strings of a list column at ``rows``, flattened: ``(codes, parent)``, each item's index
        into ``values`` (-1 when not there) and the position in ``rows`` it came from."""
        import pyarrow as pa
        import pyarrow.compute as pc

        flat = self._flattened(name, rows)
        if flat is None:
            empty = np.zeros(0, dtype="int64")
            return empty, empty
        codes = pc.index_in(flat[0], value_set=pa.array(values, type=pa.string()))
        return np.asarray(pc.fill_null(codes, -1).to_numpy(), dtype="int64"), flat[1]

    def list_items(self, name: str, rows):
        """The strings of a list column at ``rows``, flattened: ``(codes, values, parent)``, each
        item's code into ``values`` (-1 for null) and the position in ``rows`` it came from."""
        flat = self._flattened(name, rows)
        if flat is None:
            return np.zeros(0, dtype=np.int32), [], np.zeros(0, dtype="int64")
        codes, values = encode(flat[0])
        return codes, values, flat[1]

    def pylist(self, name: str, rows) -> list:
        """Python values of a few rows (lists, rare columns)."""
        if not self.has(name):
            return [None] * len(rows)
        return self._t.column(name).take(np.asarray(rows, dtype="int64")).to_pylist()


def encode(arr):
    """``(codes, values)`` of an Arrow string array."""
    import pyarrow.compute as pc

    d = arr.dictionary_encode()
    codes = d.indices
    if codes.null_count:
        codes = pc.fill_null(codes, -1)
    return np.asarray(codes.to_numpy(), dtype=np.int32), d.dictionary.to_pylist()


def lut(values: list, pred) -> np.ndarray:
    """Boolean table over codes: ``lut(values, pred)[codes]`` is ``pred(value)`` per row (False for null)."""
    return np.array([bool(pred(v)) for v in values] + [False], dtype=bool)


def with_default(codes, values, default):
    """Codes with nulls pointing at ``default`` (appended to the values)."""
    return np.where(codes < 0, len(values), codes).astype(np.int32), list(values) + [default]


def coalesce(first, second):
    """Per row the first non-null of two ``(codes, values)`` columns."""
    c1, v1 = first
    c2, v2 = second
    return np.where(c1 >= 0, c1, np.where(c2 >= 0, c2 + len(v1), -1)).astype(np.int32), list(v1) + list(v2)


def constant(n: int, value):
    """``n`` rows of one string."""
    return np.zeros(n, dtype=np.int32), [value]


def unify(*parts):
    """``(codes, values)`` columns recoded into one list of distinct values: ``([codes, ...], values)``
    (equal strings, equal codes, whichever column held them)."""
    index: dict = {}
    out = []
    for codes, values in parts:
        remap = np.array([index.setdefault(v, len(index)) for v in values] + [-1], dtype=np.int32)
        out.append(remap[codes])
    return out, list(index)


def strings(parts, order=None):
    """A pandas ``string`` array from ``(codes, values)`` parts, concatenated (then reordered by
    ``order`` when given)."""
    import pandas as pd
    import pyarrow as pa

    out, values = unify(*parts)
    codes = np.concatenate(out) if out else np.zeros(0, dtype=np.int32)
    if order is not None:
        codes = codes[order]
    dictionary = pa.array(values, type=pa.large_string())
    arr = pa.DictionaryArray.from_arrays(pa.array(codes, mask=codes < 0), dictionary)
    return pd.arrays.ArrowStringArray(arr.cast(pa.large_string()))


def int_na(values, valid):
    """A pandas ``Int64`` array (NA where not ``valid``)."""
    import pandas as pd

    return pd.arrays.IntegerArray(np.asarray(values, dtype="int64"), ~np.asarray(valid, dtype=bool))


def ns(us):
    """Microseconds (float) to integer nanoseconds, NaN as 0."""
    return np.rint(np.nan_to_num(np.asarray(us, dtype="float64"), nan=0.0) * 1000).astype("int64")


def cumcount(keys) -> np.ndarray:
    """For each row, how many earlier rows share its key (groupby(...).cumcount())."""
    keys = np.asarray(keys)
    n = len(keys)
    if not n:
        return np.zeros(0, dtype="int64")
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    idx = np.arange(n)
    first = np.maximum.accumulate(np.where(np.r_[True, sk[1:] != sk[:-1]], idx, 0))
    out = np.empty(n, dtype="int64")
    out[order] = idx - first
    return out


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

"""Build pandas tables that follow :mod:`viewer.schema` exactly (columns, order, dtypes)."""
from __future__ import annotations

from viewer.schema import TABLES

# pandas loads inside the functions: the loader imports this module, and `ringscope merge` of our
# traces runs without pandas.


def empty(table: str):
    """An empty DataFrame with the table's columns and dtypes."""
    return build(table, {})


def build(table: str, columns: dict):
    """A DataFrame from ``{column: list}``; absent columns are filled with NA (or -1 for step/response)."""
    import pandas as pd

    spec = TABLES[table]
    n = max((len(v) for v in columns.values()), default=0)
    out = {}
    for col, dtype in spec.items():
        vals = columns.get(col)
        if vals is None:
            if col in ("step", "response"):
                vals = [-1] * n
            elif dtype == "bool":
                vals = [False] * n
            elif dtype in ("int64", "int32"):
                vals = [0] * n
            else:
                vals = [None] * n
        out[col] = _series(vals, dtype)
    return pd.DataFrame(out)


def records(table: str, rows: list[dict]):
    """A DataFrame from ``[{column: value}]`` rows, as :func:`build` makes it."""
    return build(table, {c: [r[c] for r in rows] for c in (rows[0] if rows else ())})


def _series(vals, dtype):
    import numpy as np
    import pandas as pd

    if dtype == "object":
        return pd.Series(vals, dtype="object")
    if dtype in ("int64", "int32"):
        return pd.Series(np.asarray(vals, dtype=dtype))
    if dtype == "float64":
        return pd.Series(np.asarray([np.nan if v is None else v for v in vals], dtype="float64")
                         if any(v is None for v in vals) else np.asarray(vals, dtype="float64"))
    return pd.Series(vals, dtype=dtype)


def conform(table: str, df):
    """Return ``df`` with exactly the schema's columns and dtypes (extra columns kept at the end)."""
    import pandas as pd

    spec = TABLES[table]
    for col, dtype in spec.items():
        if col not in df.columns:
            fill = -1 if col in ("step", "response") else (False if dtype == "bool" else pd.NA)
            df[col] = pd.Series([fill] * len(df), dtype=dtype if fill is not pd.NA or dtype not in
                                ("int64", "int32") else "Int64", index=df.index)
        if str(df[col].dtype) != dtype:
            df[col] = df[col].astype(dtype)
    extra = [c for c in df.columns if c not in spec]
    return df[list(spec) + extra]


def concat(table: str, frames: list):
    """Concatenate per-rank frames of one table, keeping the schema's dtypes."""
    import pandas as pd

    frames = [f for f in frames if f is not None and len(f)]
    if not frames:
        return empty(table)
    for c, dtype in TABLES[table].items():
        if dtype == "category" and all(c in f.columns for f in frames):
            parts = [f[c] for f in frames]
            joined = same_categories(parts)
            if joined is not parts:
                frames = [f.assign(**{c: p}) for f, p in zip(frames, joined)]
    return conform(table, pd.concat(frames, ignore_index=True))


def same_categories(parts: list) -> list:
    """Categorical pieces of one column recoded to one sorted set of categories, so they concatenate as such."""
    import pandas as pd

    if len(parts) < 2 or not all(isinstance(p.dtype, pd.CategoricalDtype) for p in parts):
        return parts
    cats = sorted(set().union(*(p.cat.categories.tolist() for p in parts)))
    return [p if p.cat.categories.tolist() == cats else p.cat.set_categories(cats) for p in parts]

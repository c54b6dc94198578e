"""A response's cost per backend and op, fitted on the run: (fixed + per_byte * bytes) * (1 + kappa * busy)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Fit:
    backend: str
    op: str
    fixed_ns: float          # per collective
    ns_per_byte: float       # memcpy included
    n: int                   # collectives fitted
    median_err: float        # relative |fit - measured| / measured
    worst_err: float
    contention: float = 0.0  # kappa: the cost x (1 + kappa * share of ranks computing meanwhile)

    def cost_ns(self, nbytes: float, bandwidth_scale: float = 1.0, latency_scale: float = 1.0,
                busy: float = 0.0) -> float:
        idle = self.fixed_ns * latency_scale + self.ns_per_byte * nbytes / bandwidth_scale
        return idle * (1.0 + self.contention * busy)

    def row(self) -> dict:
        return {"backend": self.backend, "op": self.op, "fixed_us": round(self.fixed_ns / 1e3, 2),
                "us_per_mib": round(self.ns_per_byte * MIB / 1e3, 2),
                "contention": self.contention, "n": self.n, "median_err_pct": round(100 * self.median_err, 1),
                "worst_err_pct": round(100 * self.worst_err, 1)}


MIB = 1 << 20
KAPPAS = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0)


def fit(fused, busy: dict | None = None) -> dict[tuple[str, str], Fit]:
    """One fit per (backend, op) seen; ``busy``: response -> share of ranks computing during it."""
    if not len(fused):
        return {}
    g = fused.assign(cost=fused["end_ns"] - fused["start_ns"]).groupby("response").agg(
        backend=("backend", "first"), op=("op", "first"), nbytes=("bytes", "max"), cost=("cost", "median"))
    rows: dict = {}
    for r, b, o, n, c in zip(g.index, g["backend"], g["op"], g["nbytes"], g["cost"]):
        if c > 0:
            rows.setdefault((str(b), str(o)), []).append((int(n), int(c), (busy or {}).get(int(r), 0.0)))
    return {k: _fit_contended(k, v) for k, v in rows.items()}


def _fit_contended(key, pts) -> Fit:
    x, y, u = (np.array(col, dtype=float) for col in zip(*pts))
    best = None
    for kappa in KAPPAS if u.any() else (0.0,):
        scale = 1.0 + kappa * u
        f = _fit_one(key, x, y / scale)
        err = np.abs((f.fixed_ns + f.ns_per_byte * x) * scale - y) / y
        f.contention, f.median_err, f.worst_err = kappa, float(np.median(err)), float(err.max())
        if best is None or f.median_err < best.median_err - 1e-9:
            best = f
    return best


def _fit_one(key, x, y) -> Fit:
    fixed, per_byte = float(np.median(y)), 0.0
    if len(np.unique(x)) > 1:
        w = 1.0 / y   # relative error; reweighted towards its least absolute value (robust)
        for _ in range(30):
            a = np.stack([w, x * w], axis=1)
            (fixed, per_byte), *_ = np.linalg.lstsq(a, w * y, rcond=None)
            r = np.abs(fixed + per_byte * x - y) / y
            w = 1.0 / (y * np.sqrt(np.maximum(r, 1e-3)))
        if per_byte < 0 or fixed < 0:   # noise on a latency-bound run: no credible per-byte term
            fixed, per_byte = (float(np.median(y)), 0.0) if per_byte < 0 else (0.0, float(np.median(y / x)))
    err = np.abs(fixed + per_byte * x - y) / y
    return Fit(key[0], key[1], float(fixed), float(per_byte), len(x), float(np.median(err)), float(err.max()))


def ring_extrapolate(f: Fit, size: int, ranks: int) -> Fit:
    """The fit at ``ranks`` ranks from one at ``size``, by the ring's 2(p-1) latencies and 2(p-1)/p bytes a link."""
    if size < 2 or ranks == size:
        return f
    a_step = f.fixed_ns / (2 * (size - 1))
    b_link = f.ns_per_byte * size / (2 * (size - 1))
    return Fit(f.backend, f.op, a_step * 2 * (ranks - 1), b_link * 2 * (ranks - 1) / ranks, f.n,
               f.median_err, f.worst_err, f.contention)

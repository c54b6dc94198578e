"""A fused response's cost from the run's own collectives: time = fixed + per_byte * bytes, per backend and op.

A collective's cost is the median of its FUSED_RESPONSE spans over the ranks (memcpy into and out
of the fusion buffer included, as the runtime does it). This is not the run's α-β fit
(``run.alpha_beta()``: the wire alone, on the fastest op of each size), and is never shown under
its names: fitting the replay on that fit instead, with only the memcpy per byte and the
contention on top, made the baseline's error per step grow (docs/WHATIF.md).

The fit minimises the absolute relative error (reweighted least squares), so the many small
collectives weigh as much as the few large ones and one collective slowed by a busy core does not
drag the line; its error is reported as the median and the worst relative error over the
collectives it was fitted to.

Contention: on a CPU backend the collectives share the cores with the ranks' compute, so a
collective that ran while the ranks computed took longer than one that ran while they waited. Given
the share of ranks doing CPU work during each collective (``busy``, from the replay's rebuild), the
fit also finds kappa in time = (fixed + per_byte * bytes) * (1 + kappa * busy), the value of a small grid
with the least median error (0 where contention does not explain the spread, as on a GPU backend).
"""
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


def collectives(fused) -> list[tuple[int, str, str, int, int]]:
    """(response, backend, op, bytes, cost ns) per collective that every taking-part rank recorded."""
    if not len(fused):
        return []
    f = fused.assign(cost=fused["end_ns"] - fused["start_ns"])
    g = f.groupby("response").agg(backend=("backend", "first"), op=("op", "first"),
                                  nbytes=("bytes", "max"), cost=("cost", "median"))
    return [(int(r), str(b), str(o), int(n), int(c)) for r, b, o, n, c in
            zip(g.index, g["backend"], g["op"], g["nbytes"], g["cost"]) if c > 0]


def fit(fused, busy: dict | None = None) -> dict[tuple[str, str], Fit]:
    """One fit per (backend, op) seen; ``busy``: response -> share of ranks computing during it
    (absent: 0), which lets the fit find the contention."""
    rows: dict = {}
    for resp, b, o, n, c in collectives(fused):
        rows.setdefault((b, o), []).append((n, c, (busy or {}).get(resp, 0.0)))
    return {k: _fit_contended(k, v) for k, v in rows.items()}


def _fit_contended(key, pts) -> Fit:
    u = np.array([p[2] for p in pts], dtype=float)
    best = None
    for kappa in KAPPAS if u.any() else (0.0,):
        scale = 1.0 + kappa * u
        f = _fit_one(key, [(n, c / k) for (n, c, _), k in zip(pts, scale)])
        err = np.abs((f.fixed_ns + f.ns_per_byte * np.array([p[0] for p in pts])) * scale
                     - np.array([p[1] for p in pts])) / np.array([p[1] for p in pts])
        f.contention, f.median_err, f.worst_err = kappa, float(np.median(err)), float(err.max())
        if best is None or f.median_err < best.median_err - 1e-9:
            best = f
    return best


def _fit_one(key, pts) -> Fit:
    x = np.array([p[0] for p in pts], dtype=float)
    y = np.array([p[1] for p in pts], dtype=float)
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
    return Fit(key[0], key[1], float(fixed), float(per_byte), len(pts), float(np.median(err)), float(err.max()))


def ring_extrapolate(f: Fit, size: int, ranks: int) -> Fit:
    """The fit for ``ranks`` ranks from one at ``size``, by the ring allreduce's cost model:
    2(p-1) steps of latency and 2(p-1)/p of the bytes over each link."""
    if size < 2 or ranks == size:
        return f
    a_step = f.fixed_ns / (2 * (size - 1))
    b_link = f.ns_per_byte * size / (2 * (size - 1))
    return Fit(f.backend, f.op, a_step * 2 * (ranks - 1), b_link * 2 * (ranks - 1) / ranks, f.n,
               f.median_err, f.worst_err, f.contention)

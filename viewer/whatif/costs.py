"""Communication cost from the run's own collectives: time = alpha + beta * bytes, per backend and op.

A collective's cost is the median of its FUSED_RESPONSE spans over the ranks (memcpy into and out
of the fusion buffer included, as the runtime does it). The fit minimises the absolute relative error
(reweighted least squares), so the many small collectives weigh as much as the few large ones and
one collective slowed by a busy core does not drag the line; its error is reported as the median
and the worst relative error over the collectives it was fitted to.

Contention: on a CPU backend the collectives share the cores with the ranks' compute, so a
collective that ran while the ranks computed took longer than one that ran while they waited. Given
the share of ranks doing CPU work during each collective (``busy``, from the replay's rebuild), the
fit also finds kappa in time = (alpha + beta * bytes) * (1 + kappa * busy), the value of a small grid
with the least median error (0 where contention does not explain the spread, as on a GPU backend).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Fit:
    backend: str
    op: str
    alpha_ns: float          # per collective
    beta_ns_per_byte: float
    n: int                   # collectives fitted
    median_err: float        # relative |fit - measured| / measured
    worst_err: float
    contention: float = 0.0  # kappa: the cost x (1 + kappa * share of ranks computing meanwhile)

    def cost_ns(self, nbytes: float, bandwidth_scale: float = 1.0, latency_scale: float = 1.0,
                busy: float = 0.0) -> float:
        idle = self.alpha_ns * latency_scale + self.beta_ns_per_byte * nbytes / bandwidth_scale
        return idle * (1.0 + self.contention * busy)

    def row(self) -> dict:
        return {"backend": self.backend, "op": self.op, "alpha_us": round(self.alpha_ns / 1e3, 2),
                "gb_per_s": round(1.0 / self.beta_ns_per_byte, 3) if self.beta_ns_per_byte > 0 else None,
                "contention": self.contention, "n": self.n, "median_err_pct": round(100 * self.median_err, 1),
                "worst_err_pct": round(100 * self.worst_err, 1)}


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
        err = np.abs((f.alpha_ns + f.beta_ns_per_byte * np.array([p[0] for p in pts])) * scale
                     - np.array([p[1] for p in pts])) / np.array([p[1] for p in pts])
        f.contention, f.median_err, f.worst_err = kappa, float(np.median(err)), float(err.max())
        if best is None or f.median_err < best.median_err - 1e-9:
            best = f
    return best


def _fit_one(key, pts) -> Fit:
    x = np.array([p[0] for p in pts], dtype=float)
    y = np.array([p[1] for p in pts], dtype=float)
    alpha, beta = float(np.median(y)), 0.0
    if len(np.unique(x)) > 1:
        w = 1.0 / y   # relative error; reweighted towards its least absolute value (robust)
        for _ in range(30):
            a = np.stack([w, x * w], axis=1)
            (alpha, beta), *_ = np.linalg.lstsq(a, w * y, rcond=None)
            r = np.abs(alpha + beta * x - y) / y
            w = 1.0 / (y * np.sqrt(np.maximum(r, 1e-3)))
        if beta < 0 or alpha < 0:   # noise on a latency-bound run: no credible bandwidth term
            alpha, beta = (float(np.median(y)), 0.0) if beta < 0 else (0.0, float(np.median(y / x)))
    err = np.abs(alpha + beta * x - y) / y
    return Fit(key[0], key[1], float(alpha), float(beta), len(pts), float(np.median(err)), float(err.max()))


def ring_extrapolate(f: Fit, size: int, ranks: int) -> Fit:
    """The fit for ``ranks`` ranks from one at ``size``, by the ring allreduce's cost model:
    2(p-1) steps of latency and 2(p-1)/p of the bytes over each link."""
    if size < 2 or ranks == size:
        return f
    a_step = f.alpha_ns / (2 * (size - 1))
    b_link = f.beta_ns_per_byte * size / (2 * (size - 1))
    return Fit(f.backend, f.op, a_step * 2 * (ranks - 1), b_link * 2 * (ranks - 1) / ranks, f.n,
               f.median_err, f.worst_err, f.contention)

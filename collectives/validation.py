"""Cross-rank checks the coordinator runs when every member has asked for a tensor."""
from __future__ import annotations

from tracer import vocab as V

# fields every rank must agree on, with how to name them in an error
_FIELDS = (("op_type", "op type"), ("dtype", "dtype"), ("reduce_op", "reduce op"),
           ("prescale", "prescale factor"), ("postscale", "postscale factor"), ("root", "root rank"),
           ("device", "device"), ("backend", "backend"), ("group_size", "group size"),
           ("priority", "priority"))


def _shape_key(req):
    if req.op_type in (V.ALLGATHER, V.ALLTOALL):
        return ("ndim", len(req.shape), "trailing", tuple(req.shape[1:])) if req.shape else ()
    return tuple(req.shape)


def _describe(values: dict) -> str:
    """{rank: value} -> "ranks [0, 2]: (3, 4); rank [1]: (3, 5)"."""
    groups: dict = {}
    for rank, val in sorted(values.items()):
        groups.setdefault(repr(val), []).append(rank)
    return "; ".join(f"rank{'s' if len(r) > 1 else ''} {r if len(r) > 1 else r[0]}: {v}"
                     for v, r in groups.items())


def _signature(req) -> tuple:
    return tuple(getattr(req, attr) for attr, _ in _FIELDS) + (_shape_key(req),)


def mismatch(requests: dict) -> str | None:
    """Return a one-line error when the members' requests disagree, else None."""
    reqs = iter(requests.values())
    first = next(reqs)
    sig = _signature(first)
    if all(_signature(q) == sig for q in reqs):   # the common case, kept cheap
        return None
    what = f"{first.op_type.lower()} {first.name!r}"
    for attr, label in _FIELDS:
        vals = {r: getattr(q, attr) for r, q in requests.items()}
        if len(set(map(repr, vals.values()))) > 1:
            return f"ringscope: mismatched {label} for {what} across ranks: {_describe(vals)}"
    shapes = {r: _shape_key(q) for r, q in requests.items()}
    if len(set(shapes.values())) > 1:
        if first.op_type in (V.ALLGATHER, V.ALLTOALL):
            detail = _describe({r: tuple(q.shape) for r, q in requests.items()})
            return (f"ringscope: mismatched shape for {what} across ranks (all but the first "
                    f"dimension must agree): {detail}")
        return f"ringscope: mismatched shape for {what} across ranks: {_describe(shapes)}"
    return None

"""Settings and environment that differ between two runs, from their traces' metadata."""
from __future__ import annotations

from viewer import units
from viewer.summary import hosts

# (name, how to read it from a run); the names people and --json see
SETTINGS = (
    ("format", lambda r: r.meta.get("format")),
    ("ranks", lambda r: r.size),
    ("hosts", lambda r: len(hosts(r.ranks)) or None),
    ("backend", lambda r: r.meta.get("backend")),
    ("fusion_threshold", lambda r: r.meta.get("fusion_threshold")),
    ("cycle_time_ms", lambda r: r.meta.get("cycle_time_ms")),
    ("hierarchical_allreduce", lambda r: r.meta.get("hierarchical_allreduce", r.meta.get("hierarchical"))),
    ("local_size", lambda r: r.meta.get("local_size")),
    ("cross_size", lambda r: r.meta.get("cross_size")),
    ("trace_format_version", lambda r: r.meta.get("format_version")),
)
# the settings that shape communication: a change in communication that coincides with one says so
COMMUNICATION = {"ranks", "hosts", "backend", "fusion_threshold", "cycle_time_ms", "hierarchical_allreduce",
                 "local_size", "cross_size"}


def _versions(run) -> dict:
    """Every ``*version*`` key of the metadata but the trace format's (the runtime's, a library's)."""
    return {k: v for k, v in run.meta.items() if "version" in k and k != "format_version"
            and isinstance(v, (str, int, float))}


def settings_changed(ra, rb) -> list[dict]:
    """``{name, a, b}`` for each setting whose value differs (None: the trace does not say)."""
    out = []
    for name, read in SETTINGS:
        a, b = read(ra), read(rb)
        if a != b:
            out.append({"name": name, "a": a, "b": b})
    va, vb = _versions(ra), _versions(rb)
    for k in sorted(set(va) | set(vb)):
        if va.get(k) != vb.get(k):
            out.append({"name": k, "a": va.get(k), "b": vb.get(k)})
    return out


def show(name: str, v) -> str:
    """A setting's value for people."""
    if v is None:
        return "not recorded"
    if name == "fusion_threshold":
        return units.size(v)
    if name == "cycle_time_ms":
        return units.UNITS["ms"](v)
    return str(v)

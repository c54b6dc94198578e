"""Engine settings read from the environment (``RINGSCOPE_*``, falling back to ``HOROVOD_*``)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field

DEFAULT_FUSION_THRESHOLD = 128 * 1024 * 1024
CPU_BACKENDS = ("ring", "mpi")
KNOWN_BACKENDS = ("ring", "mpi", "nccl", "gloo")


class ConfigError(ValueError):
    """A malformed RINGSCOPE_*/HOROVOD_* setting; the message names the variable."""


def _raw(name: str, environ) -> tuple[str, str | None]:
    """(variable actually used, its value) for ``RINGSCOPE_<name>`` else ``HOROVOD_<name>``."""
    for prefix in ("RINGSCOPE_", "HOROVOD_"):
        var = prefix + name
        val = environ.get(var)
        if val is not None and val.strip() != "":
            return var, val.strip()
    return "RINGSCOPE_" + name, None


def _number(name, environ, default, kind, minimum=0):
    var, val = _raw(name, environ)
    if val is None:
        return default
    try:
        num = float(val)
        if kind is int:
            if num != int(num):
                raise ValueError
            num = int(val) if val.lstrip("+-").isdigit() else int(num)
    except (ValueError, OverflowError):
        what = "an integer" if kind is int else "a number"
        raise ConfigError(f"{var}={val!r} is not {what}") from None
    if num != num:  # NaN
        raise ConfigError(f"{var}={val!r} is not a number")
    if num < minimum:
        raise ConfigError(f"{var}={val!r} must be >= {minimum}")
    return num


def _flag(name, environ, default=False):
    var, val = _raw(name, environ)
    if val is None:
        return default
    low = val.lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{var}={val!r} is not a boolean (use 0 or 1)")


@dataclass
class Config:
    fusion_threshold: int = DEFAULT_FUSION_THRESHOLD   # bytes; 0 disables fusion
    cycle_time_ms: float = 1.0                         # longest a cycle waits to gather fusable work
    cache_capacity: int = 1024                         # response cache bits per set; 0 = off
    stall_check_s: float = 60.0                        # 0 or STALL_CHECK_DISABLE turns the check off
    stall_shutdown_s: float = 0.0                      # 0 = never
    backend: str = "ring"
    # The engine thread needs the GIL to make progress; Python's default 5 ms switch interval lets
    # a GIL-holding user loop stall communication by that much per engine step. 0 = leave it alone.
    switch_interval_ms: float = 0.5
    timeline: str | None = None
    mark_cycles: bool = False
    hierarchical_allreduce: bool = False              # ring/mpi: host by host (backends/hierarchical)
    extra: dict = field(default_factory=dict)


def load(environ=None) -> Config:
    """Parse the environment; raise :class:`ConfigError` naming the first malformed variable."""
    env = os.environ if environ is None else environ
    cfg = Config()
    cfg.fusion_threshold = _number("FUSION_THRESHOLD", env, DEFAULT_FUSION_THRESHOLD, int)
    cfg.cycle_time_ms = _number("CYCLE_TIME", env, 1.0, float)
    cfg.cache_capacity = _number("CACHE_CAPACITY", env, 1024, int)
    cfg.stall_check_s = _number("STALL_CHECK_TIME_SECONDS", env, 60.0, float)
    if _flag("STALL_CHECK_DISABLE", env):
        cfg.stall_check_s = 0.0
    cfg.stall_shutdown_s = _number("STALL_SHUTDOWN_TIME_SECONDS", env, 0.0, float)
    cfg.switch_interval_ms = _number("SWITCH_INTERVAL_MS", env, 0.5, float)
    var, val = _raw("BACKEND", env)
    if val is not None:
        if val.lower() not in KNOWN_BACKENDS:
            raise ConfigError(f"{var}={val!r} is not one of {', '.join(KNOWN_BACKENDS)}")
        cfg.backend = val.lower()
    cfg.timeline = _raw("TIMELINE", env)[1]
    cfg.mark_cycles = _flag("TIMELINE_MARK_CYCLES", env)
    cfg.hierarchical_allreduce = _flag("HIERARCHICAL_ALLREDUCE", env)
    return cfg


def cpu_backend(cfg: Config) -> str:
    """The backend for host (numpy) buffers: the configured one when it is ring/mpi, else ring."""
    return cfg.backend if cfg.backend in CPU_BACKENDS else "ring"

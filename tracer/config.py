"""Timeline settings from the environment, and the per-rank file path rules.

Path rules for ``RINGSCOPE_TIMELINE`` (``HOROVOD_TIMELINE`` when unset), applied in this order:

1. ``DYNAMIC``: recording is enabled but no file is written until ``start_timeline(path)``.
2. The path holds ``{rank}`` (any ``str.format`` spec, e.g. ``{rank:05d}``): it is formatted with the rank.
3. The path is an existing directory or ends in ``/``: the file is ``<dir>/rank-00003.json``.
4. Otherwise the rank is inserted before the suffix: ``/tmp/timeline.json`` becomes
   ``/tmp/timeline.rank-00003.json`` (a path without a suffix gets ``.rank-00003.json`` appended).

Missing parent directories are created. A path that cannot be written raises
:class:`TimelineConfigError` with a one-line message naming the variable, the path and the reason.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


class TimelineConfigError(ValueError):
    """A timeline setting (path, window, cap) that cannot be honoured."""


DYNAMIC = "DYNAMIC"
MAX_COUNTERS_HZ = 1000.0   # a sample takes 5-30 us of the tracer's thread: at most a few % of a core
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


@dataclass
class TimelineSettings:
    """Everything the environment says about the timeline of one rank."""

    spec: str | None = None          # the raw path setting (None: timeline off)
    source: str = "RINGSCOPE_TIMELINE"
    dynamic: bool = False
    mark_cycles: bool = False
    steps_window: tuple[int, int | None] | None = None   # [start, stop) in steps; stop None = open
    max_bytes: int | None = None     # size cap per file
    cap_mode: str = "stop"           # "stop" | "rotate"
    keep_parts: int = 3              # files kept when rotating
    buffer_events: int = 262144      # bounded in-memory buffer; events beyond it are dropped
    # A flush costs more than its volume: at 2 ranks the writer's CPU per step fell ~20 % from
    # 0.25 s to 0.5 s (docs/PERFORMANCE.md, commit 046f7c1); at 1 s a SIGKILL could lose over a second.
    flush_interval_s: float = 0.5
    nvtx: bool = True                # NVTX ranges unless disabled
    nvtx_force: bool = False         # emit NVTX calls even when no tool is attached to receive them
    counters_hz: float = 10.0        # system counters (CPU, RSS, load, GPU) per second; 0 = off


def _env(env, *names):
    for n in names:
        v = env.get(n)
        if v is not None and v != "":
            return n, v
    return names[0], None


def _flag(env, *names) -> bool:
    name, v = _env(env, *names)
    if v is None:
        return False
    low = v.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise TimelineConfigError(f"{name}={v!r}: expected 0/1 (or true/false)")


def parse_steps(text: str, name: str = "RINGSCOPE_TIMELINE_STEPS") -> tuple[int, int | None]:
    """``"100-200"`` → (100, 200): record steps 100..199; ``"100-"`` → from step 100 on."""
    a, sep, b = text.strip().partition("-")
    try:
        start = int(a)
        stop = int(b) if b.strip() else None
    except ValueError:
        raise TimelineConfigError(f"{name}={text!r}: expected START-STOP, e.g. 100-200") from None
    if not sep or start < 0 or (stop is not None and stop <= start):
        raise TimelineConfigError(f"{name}={text!r}: expected START-STOP with 0 <= START < STOP")
    return start, stop


def _number(env, name, kind, minimum):
    v = env.get(name)
    if v is None or v == "":
        return None
    try:
        x = kind(v)
    except ValueError:
        raise TimelineConfigError(f"{name}={v!r}: expected a number") from None
    if x < minimum:
        raise TimelineConfigError(f"{name}={v!r}: must be at least {minimum}")
    return x


def settings_from_env(env=None) -> TimelineSettings:
    """Read every timeline switch; raises TimelineConfigError on a malformed value."""
    env = os.environ if env is None else env
    source, spec = _env(env, "RINGSCOPE_TIMELINE", "HOROVOD_TIMELINE")
    s = TimelineSettings(spec=spec, source=source)
    s.dynamic = spec is not None and spec.strip() == DYNAMIC
    s.mark_cycles = _flag(env, "RINGSCOPE_TIMELINE_MARK_CYCLES", "HOROVOD_TIMELINE_MARK_CYCLES")
    steps = env.get("RINGSCOPE_TIMELINE_STEPS")
    if steps:
        s.steps_window = parse_steps(steps)
    mb = _number(env, "RINGSCOPE_TIMELINE_MAX_MB", float, 0.001)
    if mb is not None:
        s.max_bytes = int(mb * 1024 * 1024)
    mode = (env.get("RINGSCOPE_TIMELINE_CAP_MODE") or "stop").strip().lower()
    if mode not in ("stop", "rotate"):
        raise TimelineConfigError(f"RINGSCOPE_TIMELINE_CAP_MODE={mode!r}: expected stop or rotate")
    s.cap_mode = mode
    s.keep_parts = _number(env, "RINGSCOPE_TIMELINE_KEEP_PARTS", int, 1) or s.keep_parts
    s.buffer_events = _number(env, "RINGSCOPE_TIMELINE_BUFFER_EVENTS", int, 1) or s.buffer_events
    s.flush_interval_s = min(_number(env, "RINGSCOPE_TIMELINE_FLUSH_S", float, 0.01)
                             or s.flush_interval_s, 1.0)
    s.nvtx = not (_flag(env, "RINGSCOPE_DISABLE_NVTX") or _flag(env, "HOROVOD_DISABLE_NVTX_RANGES")
                  or _flag(env, "NVTX_DISABLE"))
    s.nvtx_force = _flag(env, "RINGSCOPE_NVTX_ALWAYS")
    hz = _number(env, "RINGSCOPE_TIMELINE_COUNTERS_HZ", float, 0)
    if hz is not None:
        if not hz <= MAX_COUNTERS_HZ:   # also refuses nan and inf
            raise TimelineConfigError(f"RINGSCOPE_TIMELINE_COUNTERS_HZ="
                                      f"{env['RINGSCOPE_TIMELINE_COUNTERS_HZ']!r}: must be at most "
                                      f"{MAX_COUNTERS_HZ:g}")
        s.counters_hz = hz
    return s


def rank_path(spec: str, rank: int, source: str = "RINGSCOPE_TIMELINE") -> Path:
    """The file this rank writes for a path setting (see the module docstring for the rules)."""
    spec = os.path.expanduser(spec.strip())
    if "{" in spec:
        try:
            return Path(spec.format(rank=rank))
        except (KeyError, IndexError, ValueError) as e:
            raise TimelineConfigError(f"{source}={spec!r}: bad placeholder ({e}); use {{rank}}") from None
    if spec.endswith(("/", os.sep)) or os.path.isdir(spec):
        return Path(spec) / f"rank-{rank:05d}.json"
    p = Path(spec)
    suffix = p.suffix or ".json"
    stem = p.name[: -len(p.suffix)] if p.suffix else p.name
    return p.with_name(f"{stem}.rank-{rank:05d}{suffix}")


def part_path(path: Path, part: int) -> Path:
    """Name of rotation part ``part`` (0 is the path itself): ``x.json`` → ``x.part0001.json``."""
    if part == 0:
        return path
    return path.with_name(f"{path.stem}.part{part:04d}{path.suffix}")


def check_writable(path: Path, source: str = "RINGSCOPE_TIMELINE") -> None:
    """Create missing parents and make sure ``path`` can be opened for writing."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_dir():
            raise IsADirectoryError("it is a directory")
        with open(path, "ab"):
            pass
    except OSError as e:
        reason = e.strerror or str(e)
        raise TimelineConfigError(f"{source}: cannot write timeline file {path}: {reason}") from None

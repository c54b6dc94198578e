"""``hvd.timeline.profile``: a torch.profiler schedule alongside the ringscope timeline, its Kineto
traces written under the same run directory.

    with profile() as prof:                  # <run dir>/kineto/rank<N>.<ts>.pt.trace.json per rank
        for batch in loader:
            train_step(batch)
            prof.step()

The run directory is ``run_dir``, else the timeline's (``RINGSCOPE_TIMELINE`` / ``HOROVOD_TIMELINE``:
a directory, or the directory of its file). Files go to its ``kineto/`` subdirectory, named
``rank<N>`` so the viewer knows each file's rank even without ``distributedInfo``; loading the run
directory joins each rank's Kineto lanes to its ringscope trace (docs/KINETO.md).
"""
from __future__ import annotations

import os
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, schedule, tensorboard_trace_handler

from collectives import runtime
from tracer.config import DYNAMIC, settings_from_env

SUBDIR = "kineto"


def run_directory(run_dir=None) -> Path:
    """Where this run's traces go: ``run_dir``, else the timeline's directory, else ./ringscope-run."""
    if run_dir is not None:
        return Path(run_dir)
    spec = settings_from_env().spec
    if spec and spec.strip() != DYNAMIC:
        p = Path(spec.replace("{rank", "{_rank"))   # a {rank} pattern names files, not the directory
        return p if spec.endswith("/") or p.is_dir() else p.parent
    return Path("ringscope-run")


def _rank() -> int:
    if runtime.is_initialized():
        return runtime.rank()
    for name in ("RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"):
        v = os.environ.get(name, "")
        if v.isdigit():
            return int(v)
    return 0


def profile(run_dir=None, *, wait: int = 1, warmup: int = 1, active: int = 3, repeat: int = 1,
            record_shapes: bool = False, with_stack: bool = False, profile_memory: bool = False,
            rank: int | None = None, activities=None):
    """A ``torch.profiler.profile`` on ``schedule(wait, warmup, active, repeat)`` writing this rank's
    trace to ``<run dir>/kineto/`` (use it as a context manager and call ``.step()`` each step).
    CPU activity always; CUDA too when a GPU is there."""
    out = run_directory(run_dir) / SUBDIR
    out.mkdir(parents=True, exist_ok=True)
    if activities is None:
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    r = _rank() if rank is None else int(rank)
    return torch.profiler.profile(
        activities=activities, schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=repeat),
        on_trace_ready=tensorboard_trace_handler(str(out), worker_name=f"rank{r}"),
        record_shapes=record_shapes, with_stack=with_stack, profile_memory=profile_memory)

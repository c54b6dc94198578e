"""System counters, sampled on a daemon thread of the tracer's own: this process's CPU use and
resident memory, the host's load, and the rank's GPU through NVML when there is one.

Every ``1 / RINGSCOPE_TIMELINE_COUNTERS_HZ`` seconds the thread records one Chrome "C" event per
counter (``rec.counter``; names in :data:`tracer.vocab.SYSTEM_COUNTERS`), all with the same ``ts``,
so Perfetto draws one track per counter. It stops when the recorder closes (or its window of steps
ends). Reading them costs the training thread nothing but the GIL for a few microseconds.

The GPU counters need ``pynvml`` (PyPI ``nvidia-ml-py``) and a driver; without either they are
silently absent. The rank's device follows Horovod's convention, ``torch.cuda.set_device(
hvd.local_rank())``: the ``local_rank``-th entry of ``CUDA_VISIBLE_DEVICES`` (an index or a UUID),
or NVML's device ``local_rank`` when the variable is unset (CUDA's order equals NVML's PCI order
on a node of identical GPUs).
"""
from __future__ import annotations

import os
import sys
import threading
import time

from tracer import vocab

_MIB = float(1 << 20)


class ProcessSampler:
    """CPU use since the previous sample (% of one core), RSS (MiB) and the host's load1."""

    def __init__(self, now_ns: int):
        self._cpu_ns = time.process_time_ns()
        self._wall_ns = now_ns
        self._page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

    def sample(self, now_ns: int) -> list[tuple[str, float]]:
        out = []
        cpu = time.process_time_ns()
        if now_ns > self._wall_ns:
            out.append((vocab.COUNTER_CPU_PCT,
                        round(100.0 * (cpu - self._cpu_ns) / (now_ns - self._wall_ns), 1)))
        self._cpu_ns, self._wall_ns = cpu, now_ns
        try:
            with open("/proc/self/statm", "rb") as f:
                out.append((vocab.COUNTER_RSS_MB, round(int(f.read().split()[1]) * self._page / _MIB, 1)))
        except (OSError, IndexError, ValueError):   # no /proc: no RSS track (peak RSS is no substitute)
            pass
        try:
            out.append((vocab.COUNTER_LOAD1, round(os.getloadavg()[0], 2)))
        except (OSError, AttributeError):
            pass
        return out


def _device_handle(nvml, local_rank: int, env):
    """NVML's handle of the rank's device (see the module docstring), or None."""
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        count = nvml.nvmlDeviceGetCount()
        return nvml.nvmlDeviceGetHandleByIndex(local_rank % count) if count else None
    ids = [d.strip() for d in visible.split(",") if d.strip()]
    if not ids:
        return None
    dev = ids[local_rank % len(ids)]
    if dev.isdigit():
        return nvml.nvmlDeviceGetHandleByIndex(int(dev))
    return nvml.nvmlDeviceGetHandleByUUID(dev)   # GPU-... or MIG-...; "-1" and the like fail here


NVIDIA_CONTROL = "/dev/nvidiactl"   # the NVIDIA driver's device: this host has a GPU


class NvmlGpu:
    """utilization.gpu and the memory used of one device, through NVML (the ``pynvml`` module)."""

    def __init__(self, nvml, handle):
        self._nvml = nvml
        self._handle = handle

    @classmethod
    def open(cls, local_rank: int, env=None, nvml=None) -> NvmlGpu | None:
        """The rank's device, or None when there is no pynvml, no driver or no device."""
        if nvml is None:
            try:
                import pynvml as nvml  # optional: the gpu extra
            except ImportError:
                if os.path.exists(NVIDIA_CONTROL):
                    print("ringscope: this host has an NVIDIA GPU but the pynvml module is missing, so the "
                          "timeline's GPU counters are off: pip install 'ringscope[gpu]'", file=sys.stderr)
                return None
        try:
            nvml.nvmlInit()
        except (nvml.NVMLError, OSError):
            return None
        try:
            handle = _device_handle(nvml, local_rank, os.environ if env is None else env)
        except nvml.NVMLError:
            handle = None
        if handle is None:
            cls(nvml, None).close()
            return None
        return cls(nvml, handle)

    def sample(self) -> list[tuple[str, float]]:
        nvml = self._nvml
        try:
            util = nvml.nvmlDeviceGetUtilizationRates(self._handle).gpu
            used = nvml.nvmlDeviceGetMemoryInfo(self._handle).used
        except nvml.NVMLError:   # e.g. the GPU fell off the bus: skip this sample
            return []
        return [(vocab.COUNTER_GPU_UTIL_PCT, int(util)), (vocab.COUNTER_GPU_MEM_MB, round(used / _MIB, 1))]

    def close(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except self._nvml.NVMLError:
            pass


class CounterThread:
    """Records the system counters of ``rec`` every ``1 / hz`` seconds until it is stopped or
    ``rec`` closes. ``gpu_open(local_rank)`` gives the GPU sampler (None: no GPU counters); it runs
    on this thread because NVML's init can take a while."""

    def __init__(self, rec, hz: float, local_rank: int = 0, gpu_open=NvmlGpu.open):
        self._rec = rec
        self._period = 1.0 / hz
        self._local_rank = local_rank
        self._gpu_open = gpu_open
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ringscope-counters", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        self._stopping.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _run(self) -> None:
        rec = self._rec
        proc = ProcessSampler(rec.now())
        gpu = self._gpu_open(self._local_rank)
        try:
            due = time.monotonic()
            while True:
                due += self._period
                now = time.monotonic()
                if due < now:   # fell behind (a loaded host): keep the rate, skip what was missed
                    due = now
                if self._stopping.wait(due - now) or rec.closed:
                    return
                t = rec.now()
                for name, value in proc.sample(t) + (gpu.sample() if gpu is not None else []):
                    rec.counter(name, value, ts_ns=t)
        finally:
            if gpu is not None:
                gpu.close()

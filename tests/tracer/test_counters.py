"""System counters (tracer/counters.py): sampled on the tracer's own thread at
RINGSCOPE_TIMELINE_COUNTERS_HZ, absent at 0; the GPU counters through pynvml's real Python API
with a fake NVML library object under it (no GPU or driver here), silently absent without one."""
from __future__ import annotations

import ctypes
import os
import statistics
import threading
import time

import pytest

import tracer
from tests.tracer.conftest import events, load
from tracer import vocab as v
from tracer.config import TimelineConfigError, settings_from_env
from tracer.counters import NvmlGpu

HOST = (v.COUNTER_CPU_PCT, v.COUNTER_RSS_MB, v.COUNTER_LOAD1)


def _by_name(path):
    out: dict[str, list] = {}
    for e in events(path, ph="C"):
        out.setdefault(e["name"], []).append(e)
    return out


def _counter_threads():
    return [t for t in threading.enumerate() if t.name == "ringscope-counters"]


def test_counters_at_the_configured_rate(env, tmp_path):
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/", RINGSCOPE_TIMELINE_COUNTERS_HZ="20")
    cpu0, wall0 = time.process_time(), time.perf_counter()
    rec = tracer.configure({"rank": 0, "size": 1})
    time.sleep(0.1)
    busy0 = time.process_time()
    end = time.perf_counter() + 0.5
    while time.perf_counter() < end:   # busy: as much of a core as the host gives us
        pass
    busy = time.process_time() - busy0
    time.sleep(0.5)
    cpu1 = time.process_time()
    tracer.close()
    most = int(20 * (time.perf_counter() - wall0)) + 2   # ~1 s, longer on a loaded host
    assert not _counter_threads()
    got = _by_name(rec.path)
    assert set(got) == set(HOST), got.keys()   # no GPU here: no GPU tracks
    for name in HOST:
        evs = got[name]
        assert 12 <= len(evs) <= most, (name, len(evs), most)   # 20 Hz (a loaded host may skip some)
        gaps = [b["ts"] - a["ts"] for a, b in zip(evs, evs[1:])]
        assert 45_000 <= statistics.median(gaps) <= 70_000, gaps   # µs
        assert all(e["pid"] == 0 and e["cat"] == v.CAT_COUNTER and set(e["args"]) == {"value"}
                   for e in evs)
    # cpu_pct is the CPU time used since the previous sample: over the samples it adds up to
    # what this process used (the busy loop's time at least, the whole run's at most)
    cpu = got[v.COUNTER_CPU_PCT]
    used = sum(b["args"]["value"] / 100 * (b["ts"] - a["ts"]) / 1e6 for a, b in zip(cpu, cpu[1:]))
    assert 0.8 * busy <= used <= 1.1 * (cpu1 - cpu0) + 0.01, (busy, used, cpu1 - cpu0)
    assert max(e["args"]["value"] for e in cpu[-4:]) < 5    # asleep at the end
    rss = got[v.COUNTER_RSS_MB][-1]["args"]["value"]
    with open("/proc/self/statm") as f:
        now = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    assert 0.5 * now < rss < 2 * now
    assert all(e["args"]["value"] >= 0 for e in got[v.COUNTER_LOAD1])
    # every sample's counters share one timestamp
    assert [e["ts"] for e in got[v.COUNTER_CPU_PCT]] == [e["ts"] for e in got[v.COUNTER_LOAD1]]
    assert load(rec.path)["otherData"]["ringscope"]["counters_hz"] == 20.0


def test_no_counters_and_no_thread_at_zero(env, tmp_path):
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/", RINGSCOPE_TIMELINE_COUNTERS_HZ="0")
    rec = tracer.configure({"rank": 0, "size": 1})
    assert not _counter_threads()
    time.sleep(0.3)
    tracer.close()
    assert not set(_by_name(rec.path)) & set(v.SYSTEM_COUNTERS)
    assert load(rec.path)["otherData"]["ringscope"]["counters_hz"] == 0.0


def test_counters_follow_the_window_of_steps(env, tmp_path):
    """Outside RINGSCOPE_TIMELINE_STEPS nothing is recorded, counters included; the thread ends
    with the window."""
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/", RINGSCOPE_TIMELINE_COUNTERS_HZ="50",
        RINGSCOPE_TIMELINE_STEPS="1-2")
    rec = tracer.configure({"rank": 0, "size": 1})
    time.sleep(0.3)                       # step -1: outside
    tracer.mark_step()
    time.sleep(0.2)                       # step 0: outside
    tracer.mark_step()
    t0 = rec.now() - rec.base_ns
    time.sleep(0.3)                       # step 1: recorded
    t1 = rec.now() - rec.base_ns
    tracer.mark_step()                    # the window is over: the file is finished
    deadline = time.monotonic() + 3
    while _counter_threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _counter_threads()
    tracer.close()
    ts = [e["ts"] for e in events(rec.path, ph="C") if e["name"] in HOST]
    # (a sample taken within one 20 ms period before the window opened may be its first)
    assert len(ts) >= 3 * 5 and all(t0 / 1000 - 20_000 <= t <= t1 / 1000 + 5_000 for t in ts), (t0, t1, ts)


@pytest.mark.parametrize("value,problem", [("abc", "expected a number"), ("-1", "at least 0"),
                                           ("5000", "at most 1000"), ("nan", "at most 1000")])
def test_bad_rate_is_one_line(value, problem):
    with pytest.raises(TimelineConfigError) as ei:
        settings_from_env({"RINGSCOPE_TIMELINE_COUNTERS_HZ": value})
    msg = str(ei.value)
    assert msg.startswith("RINGSCOPE_TIMELINE_COUNTERS_HZ=") and problem in msg and "\n" not in msg
    assert settings_from_env({}).counters_hz == 10.0
    assert settings_from_env({"RINGSCOPE_TIMELINE_COUNTERS_HZ": "2.5"}).counters_hz == 2.5


# ---- NVML -----------------------------------------------------------------------------------
pynvml = pytest.importorskip("pynvml", reason="nvidia-ml-py (module pynvml) is not installed")


class FakeNvmlLib:
    """Stands in for libnvidia-ml.so under pynvml's real Python wrappers: the functions pynvml
    looks up by name, taking and filling the same ctypes arguments. Device i's handle is the
    address 0x1000 + i; utilization.gpu is 10 * (i + 1) %, memory used (i + 1) GiB."""

    def __init__(self, count=2, uuids=(), init_error=0):
        self.count, self.uuids, self.init_error = count, list(uuids), init_error
        self.calls: list[str] = []

    @staticmethod
    def _index(handle):
        return ctypes.cast(handle, ctypes.c_void_p).value - 0x1000

    def nvmlInitWithFlags(self, flags):
        self.calls.append("init")
        return self.init_error

    def nvmlShutdown(self):
        self.calls.append("shutdown")
        return 0

    def nvmlDeviceGetCount_v2(self, count_ref):
        count_ref._obj.value = self.count
        return 0

    def _handle(self, i, device_ref):
        if not 0 <= i < self.count:
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        ctypes.cast(ctypes.byref(device_ref._obj), ctypes.POINTER(ctypes.c_void_p))[0] = 0x1000 + i
        return 0

    def nvmlDeviceGetHandleByIndex_v2(self, index, device_ref):
        self.calls.append(f"index {index.value}")
        return self._handle(index.value, device_ref)

    def nvmlDeviceGetHandleByUUID(self, uuid, device_ref):
        u = uuid.value.decode()
        self.calls.append(f"uuid {u}")
        if u not in self.uuids:
            return pynvml.NVML_ERROR_NOT_FOUND
        return self._handle(self.uuids.index(u), device_ref)

    def nvmlDeviceGetUtilizationRates(self, handle, util_ref):
        i = self._index(handle)
        util_ref._obj.gpu, util_ref._obj.memory = 10 * (i + 1), 5
        return 0

    def nvmlDeviceGetMemoryInfo(self, handle, mem_ref):
        i = self._index(handle)
        mem_ref._obj.total, mem_ref._obj.used = 80 << 30, (i + 1) << 30
        mem_ref._obj.free = mem_ref._obj.total - mem_ref._obj.used
        return 0


@pytest.fixture
def fake_nvml(monkeypatch):
    """Install a FakeNvmlLib as pynvml's loaded library (pynvml then skips loading the real one)."""
    def install(**kw):
        lib = FakeNvmlLib(**kw)
        monkeypatch.setattr(pynvml, "nvmlLib", lib)
        monkeypatch.setattr(pynvml, "_nvmlGetFunctionPointer_cache", {})
        return lib
    return install


@pytest.mark.parametrize("local_rank,visible,want_call,want", [
    (1, None, "index 1", (20, 2048.0)),                 # device local_rank
    (3, None, "index 1", (20, 2048.0)),                 # local_rank modulo the count
    (1, "1,0", "index 0", (10, 1024.0)),                # the local_rank-th visible device
    (0, "GPU-b,GPU-a", "uuid GPU-b", (20, 2048.0)),     # visible devices by UUID
])
def test_nvml_samples_the_ranks_device(fake_nvml, local_rank, visible, want_call, want):
    lib = fake_nvml(count=2, uuids=["GPU-a", "GPU-b"])
    env = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
    gpu = NvmlGpu.open(local_rank, env)
    assert gpu is not None and want_call in lib.calls, lib.calls
    assert gpu.sample() == [(v.COUNTER_GPU_UTIL_PCT, want[0]), (v.COUNTER_GPU_MEM_MB, want[1])]
    gpu.close()
    assert lib.calls[0] == "init" and lib.calls[-1] == "shutdown"


@pytest.mark.parametrize("kw,visible", [
    ({"init_error": 9}, None),            # NVML_ERROR_DRIVER_NOT_LOADED
    ({"count": 0}, None),                 # a driver without devices
    ({"count": 2}, ""),                   # CUDA_VISIBLE_DEVICES="" hides them all
    ({"count": 2}, "-1"),                 # no such device
    ({"count": 2, "uuids": ["GPU-a"]}, "GPU-zz"),
])
def test_nvml_without_a_usable_device_is_silently_absent(fake_nvml, kw, visible, capsys):
    lib = fake_nvml(**kw)
    env = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
    assert NvmlGpu.open(0, env) is None
    if "init_error" not in kw:
        assert lib.calls[-1] == "shutdown"     # NVML is released when nothing is sampled
    assert capsys.readouterr() == ("", "")


def test_real_pynvml_without_a_driver_gives_no_gpu_counters(env, tmp_path, capsys):
    """Here there is no libnvidia-ml: the real pynvml fails to load it, and the trace just has
    no GPU tracks (on a GPU machine this test checks that the tracks are there instead)."""
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/", RINGSCOPE_TIMELINE_COUNTERS_HZ="50")
    gpu = NvmlGpu.open(0)
    rec = tracer.configure({"rank": 0, "size": 1, "local_rank": 0})
    time.sleep(0.3)
    tracer.close()
    names = set(_by_name(rec.path))
    assert set(HOST) <= names
    if gpu is None:
        assert not names & {v.COUNTER_GPU_UTIL_PCT, v.COUNTER_GPU_MEM_MB}
    else:
        gpu.close()
        assert {v.COUNTER_GPU_UTIL_PCT, v.COUNTER_GPU_MEM_MB} <= names
    assert capsys.readouterr().err == ""


def test_gpu_counters_in_the_trace_with_the_fake_library(env, tmp_path, fake_nvml):
    """The whole path: the counter thread opens NVML for the rank's local_rank and writes both
    GPU tracks at the rate, and shuts NVML down at close."""
    lib = fake_nvml(count=2)
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/", RINGSCOPE_TIMELINE_COUNTERS_HZ="50")
    os.environ.pop("CUDA_VISIBLE_DEVICES", None)
    rec = tracer.configure({"rank": 3, "size": 4, "local_rank": 1})
    time.sleep(0.4)
    tracer.close()
    got = _by_name(rec.path)
    assert set(got) == set(v.SYSTEM_COUNTERS)
    assert {e["args"]["value"] for e in got[v.COUNTER_GPU_UTIL_PCT]} == {20}
    assert {e["args"]["value"] for e in got[v.COUNTER_GPU_MEM_MB]} == {2048.0}
    assert all(e["pid"] == 3 for e in got[v.COUNTER_GPU_MEM_MB])
    assert len(got[v.COUNTER_GPU_UTIL_PCT]) >= 8
    assert lib.calls[-1] == "shutdown"


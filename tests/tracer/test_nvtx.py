"""NVTX ranges for every phase, checked through the emitter (nvtx is a no-op without CUDA here).

Without a tool attached (no Nsight here) the tracer skips NVTX altogether, since every call would do
nothing; ``RINGSCOPE_NVTX_ALWAYS=1`` makes it call NVTX anyway, which is how these tests see the
calls."""
from __future__ import annotations

import threading

import tracer
from tracer import vocab as v
from tracer.nvtx_emitter import DOMAIN


def _ranges(log):
    starts = {e[1]: e for e in log if e[0] == "start"}
    ended = {e[1] for e in log if e[0] == "end"}
    return starts, ended


def test_every_phase_is_an_nvtx_range(env, tmp_path):
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/", RINGSCOPE_NVTX_ALWAYS="1")
    rec = tracer.configure({"rank": 0})
    assert rec.emitter is not None, "the nvtx package is installed and NVTX is forced on"
    rec.emitter.log = log = []
    tracer.mark_step()
    t = "allreduce.fc.weight"
    rec.async_begin(t, t, {v.ARG_TENSOR: t, v.ARG_BYTES: 4096})
    rec.async_begin(t, v.negotiate_name(v.ALLREDUCE))
    rec.async_end(t, v.negotiate_name(v.ALLREDUCE))
    rec.async_begin(t, v.QUEUE)
    rec.async_end(t, v.QUEUE)
    spans = [(v.TID_FUSION, v.FUSED_RESPONSE, v.CAT_FUSION), (v.TID_FUSION, v.MEMCPY_IN_FUSION_BUFFER,
             v.CAT_MEMCPY), (v.TID_BACKEND, v.RING_ALLREDUCE, v.CAT_COMM),
             (v.TID_BACKEND, v.RING_REDUCE_SCATTER, v.CAT_COMM), (v.TID_BACKEND, v.RING_ALLGATHER,
             v.CAT_COMM), (v.TID_FUSION, v.MEMCPY_OUT_FUSION_BUFFER, v.CAT_MEMCPY),
             (v.TID_FRAMEWORK, v.SYNCHRONIZE, v.CAT_FRAMEWORK), (v.TID_CYCLES, v.CYCLE, v.CAT_CYCLE)]
    toks = [rec.begin(tid, name, cat, {v.ARG_BYTES: 8192}) for tid, name, cat in spans]
    # ranges may end on another thread (start/end ranges, not push/pop)
    th = threading.Thread(target=lambda: [rec.end(tok) for tok in reversed(toks)])
    th.start()
    th.join()
    rec.async_end(t, t)
    tracer.mark_step()
    starts, ended = _ranges(log)
    by_cat = {s[3]: s for s in starts.values()}
    for _, name, _ in spans:
        s = by_cat[name]
        assert s[2] == DOMAIN and s[4] == name and s[5] == 8192 and s[1] in ended, s
    assert by_cat[v.CAT_TENSOR][4:] == (t, 4096) and by_cat[v.CAT_TENSOR][1] in ended
    for phase in (v.negotiate_name(v.ALLREDUCE), v.QUEUE):
        assert by_cat[phase][4:] == (f"{phase} {t}", 4096) and by_cat[phase][1] in ended
    steps = [s for s in starts.values() if s[3] == v.STEP]
    assert [s[4] for s in steps] == ["STEP 0", "STEP 1"]
    assert steps[0][1] in ended and steps[1][1] not in ended      # step 1 is still running
    assert len(starts) == len(spans) + 4 + 1     # + the step 1 range still open
    assert sum(1 for s in starts.values() if s[1] not in ended) == 1


def test_tensor_lifecycle_ranges(env, tmp_path):
    """The runtime's fast path: ranges open live at each transition, the trace is written at the end."""
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/", RINGSCOPE_NVTX_ALWAYS="1")
    rec = tracer.configure({"rank": 0})
    rec.emitter.log = log = []
    t, neg = "allreduce.w", v.negotiate_name(v.ALLREDUCE)
    t0 = rec.now()
    rec.tensor_begin(t, neg, t0, 0, (v.ALLREDUCE, 512, "float32", (128,), "Sum", 0))
    rec.tensor_phase(t, neg, v.QUEUE)
    rec.tensor_phase(t, v.QUEUE)
    rec.tensor_end(t, neg, t0 + 10, t0 + 20, t0 + 30)
    starts, ended = _ranges(log)
    assert sorted((s[3], s[4], s[5]) for s in starts.values()) == sorted([
        (v.CAT_TENSOR, t, 512), (neg, f"{neg} {t}", 512), (v.QUEUE, f"{v.QUEUE} {t}", 512)])
    assert set(starts) == ended
    tracer.close()


def test_nvtx_skipped_without_a_tool(env, tmp_path):
    import nvtx

    from tracer.nvtx_emitter import tool_attached
    assert not tool_attached(nvtx), "no Nsight here: nvtx hands out its dummy domain"
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/")
    assert tracer.configure({"rank": 0}).emitter is None
    tracer.close()


def test_nvtx_off_when_disabled(env, tmp_path):
    for var in ("RINGSCOPE_DISABLE_NVTX", "HOROVOD_DISABLE_NVTX_RANGES", "NVTX_DISABLE"):
        env(RINGSCOPE_TIMELINE=str(tmp_path) + "/", RINGSCOPE_NVTX_ALWAYS="1", **{var: "1"})
        assert tracer.configure({"rank": 0}).emitter is None
        tracer.close()
        env(**{var: "0"})


def test_real_nvtx_module_accepts_our_calls():
    import nvtx

    from tracer.nvtx_emitter import NvtxEmitter
    em = NvtxEmitter(nvtx)
    h = em.start("RING_ALLREDUCE", "RING_ALLREDUCE", 1 << 40)
    em.end(h)
    em.end(em.start("QUEUE x", "QUEUE", None))


def test_each_file_marks_its_rank_for_nsight(env, tmp_path):
    import nvtx

    from tracer.config import settings_from_env
    from tracer.nvtx_emitter import NvtxEmitter
    from tracer.timeline import TimelineRecorder
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/")
    em = NvtxEmitter(nvtx, log=[])
    rec = TimelineRecorder({"rank": 3, "size": 4}, settings_from_env(), tmp_path / "r.json", em)
    rec.close()
    assert ("mark", 0, DOMAIN, "ringscope rank=3 size=4") in em.log

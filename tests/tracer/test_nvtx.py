"""NVTX ranges from the recorder's spans, checked through the emitter (nvtx is a no-op without
CUDA here; its real module is called, so its API surface is checked).

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


def test_spans_are_nvtx_ranges_over_the_same_calls(env, tmp_path):
    """span/begin/end give NVTX start/end ranges (any thread may end one), STEP n a range per
    step; the trace gets the same spans."""
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/", RINGSCOPE_NVTX_ALWAYS="1")
    rec = tracer.configure({"rank": 0})
    assert rec.emitter is not None, "the nvtx package is installed and NVTX is forced on"
    rec.emitter.log = log = []
    tracer.mark_step()
    spans = [(v.TID_FUSION, v.FUSED_RESPONSE, v.CAT_FUSION), (v.TID_BACKEND, v.RING_ALLREDUCE,
             v.CAT_COMM), (v.TID_BACKEND, v.RING_REDUCE_SCATTER, v.CAT_COMM),
             (v.TID_FRAMEWORK, v.SYNCHRONIZE, v.CAT_FRAMEWORK),
             (v.TID_CYCLES, v.CYCLE, v.CAT_CYCLE)]
    toks = [rec.begin(tid, name, cat, {v.ARG_BYTES: 8192}) for tid, name, cat in spans[:3]]
    th = threading.Thread(target=lambda: [rec.end(tok) for tok in reversed(toks)])
    th.start()
    th.join()
    for tid, name, cat in spans[3:]:
        with rec.span(tid, name, cat, {v.ARG_BYTES: 8192, "x": 1}):
            pass
    rec.complete(v.TID_FUSION, v.MEMCPY_IN_FUSION_BUFFER, v.CAT_MEMCPY, 1, 2)   # no range
    tracer.mark_step()
    starts, ended = _ranges(log)
    by_cat = {s[3]: s for s in starts.values()}
    for _, name, _ in spans:
        s = by_cat[name]
        assert s[2] == DOMAIN and s[4] == name and s[5] == 8192 and s[1] in ended, s
    steps = [s for s in starts.values() if s[3] == v.STEP]
    assert [s[4] for s in steps] == ["STEP 0", "STEP 1"]
    assert steps[0][1] in ended and steps[1][1] not in ended      # step 1 is still running
    assert len(starts) == len(spans) + 2
    tracer.close()
    xs = {e["name"] for e in tracer_events(rec.path) if e["ph"] == "X"}
    assert {name for _, name, _ in spans} | {v.MEMCPY_IN_FUSION_BUFFER, v.STEP} <= xs


def tracer_events(path):
    import json
    return json.loads(path.read_text())["traceEvents"]


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
    from tracer.timeline import open_recorder
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/")
    em = NvtxEmitter(nvtx, log=[])
    rec = open_recorder({"rank": 3, "size": 4}, settings_from_env(), tmp_path / "r.json", em)
    rec.close()
    assert ("mark", 0, DOMAIN, "ringscope rank=3 size=4") in em.log

"""hvd.timeline on real torch, in this process: regions nest (on any thread, as decorators too),
wrap_loader around a real DataLoader with 2 workers stays transparent, watch changes no output,
each span is an NVTX range of the same name, and nothing is recorded with the timeline off."""
from __future__ import annotations

import threading
import time

import pytest
import torch
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import collectives.torch as hvd
import tracer
from tests.tracer.conftest import env, events, load  # noqa: F401  (the env fixture)
from tracer import vocab as v


def _spans(path, tid=None):
    return [e for e in events(path, ph="X") if e.get("cat") in (v.CAT_PHASE, v.CAT_REGION)
            and (tid is None or e["tid"] == tid)]


def _inside(inner, outer):
    return outer["ts"] <= inner["ts"] and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"]


def _nests(spans):
    """True when no two spans on one tid partly overlap (what Perfetto needs)."""
    for i, a in enumerate(spans):
        for b in spans[i + 1:]:
            if a["tid"] != b["tid"]:
                continue
            a0, a1, b0, b1 = a["ts"], a["ts"] + a["dur"], b["ts"], b["ts"] + b["dur"]
            if a0 < b0 < a1 < b1 or b0 < a0 < b1 < a1:
                return False
    return True


def test_regions_nest_on_every_thread(env, tmp_path):  # noqa: F811
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/")
    rec = tracer.configure({"rank": 0, "size": 1})
    tracer.mark_step()

    @hvd.timeline.region("decorated")
    def work(x):
        with hvd.timeline.region("inner"):
            time.sleep(0.002)
        return x + 1

    shared = hvd.timeline.region("shared")   # one object entered by two threads at once
    barrier = threading.Barrier(2)

    def thread_body():
        with shared:
            barrier.wait()
            assert work(1) == 2
            barrier.wait()

    with hvd.timeline.region("outer"):
        th = threading.Thread(target=thread_body, name="prefetcher")
        th.start()
        with shared:
            barrier.wait()
            assert work(41) == 42
            barrier.wait()
        th.join()
    tracer.mark_step()
    tracer.close()
    spans = _spans(rec.path)
    main = [s for s in spans if s["tid"] == v.TID_FRAMEWORK]
    other = [s for s in spans if s["tid"] == v.TID_USER_BASE]
    assert sorted(s["name"] for s in main) == ["decorated", "inner", "outer", "shared"]
    assert sorted(s["name"] for s in other) == ["decorated", "inner", "shared"]
    assert all(s["cat"] == v.CAT_REGION and s["args"]["step"] == 0 for s in spans)
    by = {(s["tid"], s["name"]): s for s in spans}
    for tid in (v.TID_FRAMEWORK, v.TID_USER_BASE):
        assert _inside(by[tid, "inner"], by[tid, "decorated"])
        assert _inside(by[tid, "decorated"], by[tid, "shared"])
    assert _inside(by[v.TID_FRAMEWORK, "shared"], by[v.TID_FRAMEWORK, "outer"])
    (step,) = [e for e in events(rec.path, ph="X", name=v.STEP)]
    assert all(_inside(s, step) for s in spans)      # the regions are in their step
    assert _nests(spans)
    names = {e["tid"]: e["args"]["name"] for e in events(rec.path, ph="M", name="thread_name")}
    assert names[v.TID_USER_BASE] == "prefetcher" and names[v.TID_FRAMEWORK] == "framework"


def test_checkpoint_is_a_phase_around_a_save(env, tmp_path):  # noqa: F811
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/")
    rec = tracer.configure({"rank": 0, "size": 1})
    tracer.mark_step()
    model = torch.nn.Linear(4, 4)
    with hvd.timeline.checkpoint():
        torch.save(model.state_dict(), tmp_path / "ckpt.pt")
    save = hvd.timeline.checkpoint()(torch.save)   # as a decorator too
    save(model.state_dict(), tmp_path / "ckpt2.pt")
    tracer.mark_step()
    tracer.close()
    spans = [s for s in _spans(rec.path) if s["name"] == v.CHECKPOINT]
    assert len(spans) == 2 and all(s["cat"] == v.CAT_PHASE and s["tid"] == v.TID_FRAMEWORK for s in spans)
    assert (tmp_path / "ckpt.pt").exists() and (tmp_path / "ckpt2.pt").exists()


def test_region_rejects_a_bad_name_and_is_in_the_numpy_api_too():
    import collectives
    assert "timeline" in collectives.__all__
    # hvd.timeline adds profile() to them, and a watch that also traces a DDP module (tests/torch/test_ddp.py)
    for name in ("region", "checkpoint", "wrap_loader"):
        assert getattr(collectives.timeline, name) is getattr(hvd.timeline, name)
    assert not hasattr(collectives.timeline, "profile")   # torch.profiler's: only under collectives.torch
    with pytest.raises(ValueError, match="non-empty string"):
        hvd.timeline.region("")


def _dataset(n=40):
    g = torch.Generator().manual_seed(0)
    return TensorDataset(torch.randn(n, 3, generator=g), torch.arange(n))


def test_wrap_loader_with_two_workers_is_transparent(env, tmp_path):  # noqa: F811
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/")
    rec = tracer.configure({"rank": 0, "size": 1})
    ds = _dataset()
    sampler = DistributedSampler(ds, num_replicas=2, rank=1, shuffle=True, seed=3)
    plain = DataLoader(ds, batch_size=4, sampler=sampler, num_workers=2)
    loader = hvd.timeline.wrap_loader(DataLoader(ds, batch_size=4, sampler=sampler, num_workers=2))
    assert len(loader) == len(plain) == 5 and loader.sampler is sampler
    assert loader.batch_size == 4 and loader.num_workers == 2 and loader.dataset is ds
    got = {}
    for epoch in (0, 1):
        loader.set_epoch(epoch)        # the DataLoader has none: its DistributedSampler's
        assert sampler.epoch == epoch
        got[epoch] = [b[1].tolist() for b in loader]
        tracer.mark_step()
        assert got[epoch] == [b[1].tolist() for b in plain]     # the same batches, same order
    assert got[0] != got[1]                                      # set_epoch reshuffled
    tracer.close()
    waits = _spans(rec.path)
    # one wait per batch, and the one that ended each epoch
    assert [w["name"] for w in waits] == [v.DATA_WAIT] * 12
    assert all(w["tid"] == v.TID_FRAMEWORK and w["cat"] == v.CAT_PHASE for w in waits)
    assert [w["args"]["step"] for w in waits] == [-1] * 6 + [0] * 6
    # the workers (forked) recorded nothing: every event is this process's
    assert {e["pid"] for e in events(rec.path)} == {0}
    assert load(rec.path)["otherData"]["ringscope"]["pid"] is not None


def test_wrap_loader_passes_set_epoch_and_len_of_any_iterable():
    class Shards:
        def __init__(self):
            self.epoch = None

        def __iter__(self):
            return iter(range(3))

        def set_epoch(self, e):
            self.epoch = e

    s = Shards()
    w = hvd.timeline.wrap_loader(s)
    w.set_epoch(7)
    assert s.epoch == 7 and list(w) == [0, 1, 2] and bool(w)
    with pytest.raises(TypeError):
        len(w)                          # as len(s) would
    with pytest.raises(AttributeError):
        w.sampler                       # noqa: B018  (as s.sampler would)
    gen = hvd.timeline.wrap_loader(x for x in "ab")
    assert list(gen) == ["a", "b"]


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 16)
        self.b = torch.nn.Linear(16, 4)

    def forward(self, x, fail=False):
        if fail:
            raise RuntimeError("boom")
        return self.b(torch.relu(self.a(x)))


def test_watch_gives_bit_identical_outputs_and_one_forward_per_call(env, tmp_path):  # noqa: F811
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/")
    rec = tracer.configure({"rank": 0, "size": 1})
    torch.manual_seed(0)
    model = _Net()
    x = torch.randn(5, 8)

    def run():
        model.zero_grad()
        out = model(x)
        out.square().sum().backward()
        return out.detach().clone(), [p.grad.clone() for p in model.parameters()]

    ref_out, ref_grads = run()
    handle = hvd.timeline.watch(model)
    out, grads = run()
    assert torch.equal(out, ref_out) and all(torch.equal(a, b) for a, b in zip(grads, ref_grads))
    assert out.data_ptr() != 0
    with pytest.raises(RuntimeError, match="boom"):
        model(x, fail=True)             # the span still ends
    tracer.mark_step()
    model(x)
    handle.remove()
    model(x)                            # not watched any more
    with hvd.timeline.watch(model):     # a with block removes its hooks
        model(x)
    model(x)
    tracer.close()
    fwd = _spans(rec.path)
    assert [(s["name"], s["args"]["step"]) for s in fwd] == [(v.FORWARD, -1)] * 2 + [(v.FORWARD, 0)] * 2
    assert not model._forward_hooks and not model._forward_pre_hooks


def test_spans_are_nvtx_ranges_of_the_same_names(env, tmp_path):  # noqa: F811
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/", RINGSCOPE_NVTX_ALWAYS="1")
    rec = tracer.configure({"rank": 0, "size": 1})
    assert rec.emitter is not None, "the nvtx package is installed and NVTX is forced on"
    rec.emitter.log = log = []
    model = _Net()
    with hvd.timeline.watch(model):
        for (x,) in hvd.timeline.wrap_loader([(torch.randn(2, 8),)]):
            with hvd.timeline.region("my region"):
                model(x)
    tracer.close()
    started = [e[4] for e in log if e[0] == "start"]
    ended = {e[1] for e in log if e[0] == "end"}
    assert started == [v.DATA_WAIT, "my region", v.FORWARD, v.DATA_WAIT]
    assert {e[1] for e in log if e[0] == "start"} <= ended
    assert [s["name"] for s in _spans(rec.path)] == [v.DATA_WAIT, v.FORWARD, "my region", v.DATA_WAIT]


def test_nothing_is_recorded_with_the_timeline_off(env, tmp_path):  # noqa: F811
    """Off (no timeline), or outside the window of steps: no span opens, no event is written."""
    env()
    assert not tracer.configure({"rank": 0}).enabled
    model = _Net()
    with hvd.timeline.watch(model), hvd.timeline.region("r"):
        assert hvd.timeline.open_span(v.FORWARD, v.CAT_PHASE) is None
        assert len(list(hvd.timeline.wrap_loader(range(3)))) == 3
        model(torch.randn(1, 8))
    tracer.close()
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/", RINGSCOPE_TIMELINE_STEPS="1-2")
    rec = tracer.configure({"rank": 0})
    with hvd.timeline.watch(model):
        for step in range(3):
            tracer.mark_step()                      # steps 0, 1, 2: only 1 is recorded
            with hvd.timeline.region(f"r{step}"):
                model(torch.randn(1, 8))
    tracer.close()
    assert [(s["name"], s["args"]["step"]) for s in _spans(rec.path)] == [(v.FORWARD, 1), ("r1", 1)]

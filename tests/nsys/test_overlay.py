"""GPU lanes: kernels in the right rank's lane, inside the right phase, NCCL kernels marked."""
from __future__ import annotations

import pandas as pd

from viewer.nsys.attach import with_gpu_rows
from viewer.nsys.overlay import chrome_events, gpu_event_rows, is_nccl_kernel
from viewer.schema import EVENTS


def test_kernels_land_in_the_right_rank_inside_the_right_phase(run, overlay, per_rank):
    truth, _ = per_rank
    ev = run.events
    a = overlay.aligned
    placed = [p for p in truth.kernels if p.nccl]
    assert len(placed) >= 12
    checked = 0
    for p in placed:
        # the phase the fixture put it in, on that rank, for that response
        ph = ev[(ev["rank"] == p.rank) & (ev["thread"] == "backend") & (ev["name"] == p.phase)
                & (ev["response"] == p.response)]
        assert len(ph) == 1, (p, len(ph))
        t0, t1 = int(ph["t_ns"].iloc[0]), int(ph["t_ns"].iloc[0] + ph["dur_ns"].iloc[0])
        k = a[(a["name"] == p.name) & (a["response"] == p.response)]
        assert set(k["rank"]) == {p.rank} or len(k) == 2, k   # both ranks may run the same kernel
        k = k[k["rank"] == p.rank]
        inside = k[(k["t_ns"] >= t0) & (k["t_ns"] + k["dur_ns"] <= t1)]
        assert len(inside) == 1, (p, t0, t1, k[["t_ns", "dur_ns"]])
        checked += 1
    assert checked == len(placed)


def test_compute_kernels_belong_to_no_response(overlay):
    a = overlay.aligned
    comp = a[~a["nccl"]]
    assert len(comp) > 0 and (comp["response"] == -1).all() and set(comp["stream"]) == {7}
    assert (a[a["nccl"]]["response"] >= 0).all()


def test_both_nccl_name_styles_recognised(overlay):
    names = overlay.aligned[overlay.aligned["nccl"]]["name"]
    assert names.str.startswith("ncclDevKernel_").any()
    assert names.str.startswith("ncclKernel_").any()
    assert all(is_nccl_kernel(n) for n in set(names))
    assert not is_nccl_kernel("void at::native::vectorized_elementwise_kernel<4>(int)")
    assert is_nccl_kernel("void ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclDevComm*)")


def test_event_rows_follow_the_events_schema(run, overlay):
    rows = gpu_event_rows(overlay.aligned)
    assert list(rows.columns) == list(EVENTS)
    assert {c: str(t) for c, t in rows.dtypes.items()} == EVENTS
    assert set(rows["thread"]) == {"gpu:13", "gpu:7"}
    assert set(rows["cat"]) == {"nccl", "kernel"}
    merged = with_gpu_rows(run.tables, overlay)
    assert len(merged.events) == len(run.events) + len(rows)
    assert {c: str(t) for c, t in merged.events.dtypes.items()} == EVENTS   # no strings as objects
    assert merged.events["t_ns"].is_monotonic_increasing
    assert sorted(merged.meta["nsys"]) == [0, 1]
    assert len(run.events[run.events["thread"].str.startswith("gpu:")]) == 0   # original untouched


def test_chrome_events(overlay):
    ev = chrome_events(overlay.aligned, ts_origin_ns=0)
    meta = [e for e in ev if e["ph"] == "M" and e["name"] == "thread_name"]
    assert {(e["pid"], e["args"]["name"]) for e in meta} == {
        (0, "gpu:13"), (0, "gpu:7"), (1, "gpu:13"), (1, "gpu:7")}
    xs = [e for e in ev if e["ph"] == "X"]
    assert len(xs) == len(overlay.aligned)
    nccl = [e for e in xs if e["cat"] == "nccl"]
    assert all("response" in e["args"] for e in nccl)
    a = overlay.aligned.sort_values("t_ns")
    assert min(e["ts"] for e in xs) == a["t_ns"].iloc[0] / 1000
    # Perfetto: X events on one thread must not overlap
    for _thread, g in pd.DataFrame(xs).groupby(["pid", "tid"]):
        g = g.sort_values("ts")
        assert ((g["ts"] + g["dur"]).iloc[:-1].to_numpy() <= g["ts"].iloc[1:].to_numpy() + 1e-6).all()

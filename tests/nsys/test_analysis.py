"""NCCL kernel time against CPU-observed op time, and GPU idle time during communication."""
from __future__ import annotations

from viewer.nsys import analysis
from viewer.nsys.attach import with_gpu_rows


def test_comm_gpu_times(run, overlay, per_rank):
    truth, _ = per_rank
    t = with_gpu_rows(run.tables, overlay)
    df = analysis.comm_gpu_times(t.events, t.fused_ops)
    assert set(df["rank"]) == {0, 1}
    assert len(df) == len(run.fused_ops)
    assert (df["nccl_kernels"] >= 1).all()
    # per op: what the fixture placed
    for (rank, resp), g in df.groupby(["rank", "response"]):
        row = g.iloc[0]
        placed = [p for p in truth.kernels if p.nccl and p.rank == rank and p.response == resp]
        assert row["nccl_kernels"] == len(placed)
        expect = sum(p.wall_end_ns - p.wall_start_ns for p in placed)
        assert abs(row["nccl_kernel_ns"] - expect) <= 2 * len(placed)
        assert row["overhead_ns"] == row["cpu_ns"] - row["nccl_kernel_ns"]
        assert 0 < row["kernel_share"] < 1
        assert row["launch_delay_ns"] > 0 and row["sync_tail_ns"] > 0
        if len(placed) == 2:   # ring: reduce-scatter kernel, gap, allgather kernel
            gap = max(placed[1].wall_start_ns - placed[0].wall_end_ns,
                      placed[0].wall_start_ns - placed[1].wall_end_ns)
            assert abs(row["gpu_idle_ns"] - gap) <= 4, (row, gap)
        else:
            assert row["gpu_idle_ns"] == 0
    assert {"op", "bytes", "backend"} <= set(df.columns)


def test_gpu_idle_during_comm(run, overlay):
    t = with_gpu_rows(run.tables, overlay)
    per_op = analysis.comm_gpu_times(t.events)
    idle = analysis.gpu_idle_during_comm(t.events)
    assert list(idle["rank"]) == [0, 1]
    for r in idle.itertuples():
        assert 0 < r.gpu_busy_ns < r.comm_ns
        assert r.gpu_idle_ns == r.comm_ns - r.gpu_busy_ns
        ops = per_op[per_op["rank"] == r.rank]
        # the fixture's kernels all lie inside their ops: busy time is their NCCL time
        assert abs(r.gpu_busy_ns - ops["nccl_kernel_ns"].sum()) <= len(ops) * 4


def test_op_without_kernels():
    import pandas as pd

    from viewer.schema import EVENTS

    ev = pd.DataFrame([{"rank": 0, "thread": "backend", "name": "NCCL_ALLREDUCE", "cat": "comm",
                        "ph": "X", "t_ns": 100, "dur_ns": 50, "tensor": pd.NA, "step": 0,
                        "response": 3, "bytes": 8, "value": float("nan"), "depth": 0}]).astype(EVENTS)
    df = analysis.comm_gpu_times(ev)
    assert df.iloc[0]["nccl_kernels"] == 0 and df.iloc[0]["overhead_ns"] == 50
    assert pd.isna(df.iloc[0]["launch_delay_ns"])
    idle = analysis.gpu_idle_during_comm(ev)
    assert idle.iloc[0]["gpu_idle_ns"] == 50 and idle.iloc[0]["idle_share"] == 1.0

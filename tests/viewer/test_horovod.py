"""Real Horovod timelines (../shared/horovod_timelines): every one loads into the schema tables."""
from __future__ import annotations

import json

import pytest

from tests.viewer.conftest import HOROVOD_FILES, horovod_file
from viewer import Run
from viewer.schema import TABLES


def _raw_ticks(path):
    """(tensor, rank, ts) ticks read straight from the file, independently of the loader."""
    text = path.read_text().rstrip().rstrip(",")
    evs = json.loads(text if text.endswith("]") else text + "]")
    names = {e["pid"]: e["args"]["name"] for e in evs if e.get("ph") == "M" and "name" in e.get("args", {})}
    return [(names[e["pid"]], int(e["name"]), e["ts"]) for e in evs if e.get("ph") == "X" and e["name"].isdigit()]


@pytest.mark.parametrize("key", list(HOROVOD_FILES))
def test_each_timeline_loads_with_schema_columns(key):
    run = Run.load(horovod_file(key), cache=False)
    for name, cols in TABLES.items():
        df = getattr(run, name)
        assert list(df.columns)[: len(cols)] == list(cols), name
        for c, dt in cols.items():
            assert str(df[c].dtype) == dt, (name, c, df[c].dtype)
    assert len(run.events) > 0 and len(run.tensor_ops) > 0
    assert run.meta["format"] == ("horovod-legacy" if key == "legacy_7ranks" else "horovod-modern")


def test_legacy_7rank_readiness_and_stragglers():
    path = horovod_file("legacy_7ranks")
    run = Run.load(path, cache=False)
    ticks = _raw_ticks(path)
    rd = run.readiness
    assert len(rd) == len(ticks)
    assert sorted(rd["rank"].unique().tolist()) == sorted({r for _, r, _ in ticks}) == [0, 1, 2, 4, 5, 6, 7]
    assert (rd["source"] == "horovod").all()
    assert run.meta["origin_epoch_ns"] is None  # legacy: no epoch, times from the first event
    st = run.stragglers()
    assert len(st) == 8  # ranks 0..7 (rank 3 never ticked: a row of zeros)
    # independently: the last tick per tensor (tensors with >= 2 ticks)
    by_t = {}
    for t, r, ts in ticks:
        by_t.setdefault(t, []).append((ts, r))
    lasts = [max(v)[1] for v in by_t.values() if len(v) >= 2]
    top = st.iloc[0]
    assert top["rank"] == max(set(lasts), key=lasts.count) == 7
    assert top["times_last"] == lasts.count(7)
    assert st.set_index("rank").loc[3, "negotiations"] == 0


def test_legacy_fused_op_found():
    run = Run.load(horovod_file("legacy_7ranks"), cache=False)
    fo = run.fused_ops
    assert len(fo) == 1 and fo.iloc[0]["count"] == 2 and fo.iloc[0]["activity"] == "NCCL_ALLREDUCE"
    assert fo.iloc[0]["memcpy_in_ns"] > 0 and fo.iloc[0]["memcpy_out_ns"] > 0
    # dtype/shape from the outer E args: [10] and [256, 10] float32
    assert fo.iloc[0]["bytes"] == (10 + 2560) * 4


@pytest.mark.parametrize("key", ["mpi_2ranks", "gloo_2ranks"])
def test_two_rank_files_give_per_tensor_negotiation_times(key):
    path = horovod_file(key)
    run = Run.load(path, cache=False)
    ops = run.tensor_ops
    assert len(ops) == 20
    assert ops["negotiated_ns"].notna().all()
    neg = (ops["negotiated_ns"] - ops["submit_ns"]).astype("int64")
    assert (neg >= 0).all() and neg.max() > 0
    assert (ops["bytes"] == 65536 * 4).all() and (ops["dtype"] == "float32").all()
    per = run.negotiations()
    assert set(per["rank"]) == {0, 1} and per["is_last"].sum() == 20
    ticks = _raw_ticks(path)
    for tensor, g in per.groupby("tensor"):
        mine = sorted((ts, r) for t, r, ts in ticks if t == tensor)
        assert g.loc[g["is_last"], "rank"].item() == mine[-1][1]
        assert g["spread_ns"].iloc[0] == int(round((mine[-1][0] - mine[0][0]) * 1000))
    assert run.meta["origin_epoch_ns"] > 1.7e18  # modern: absolute epoch


def test_modern_broadcasts_one_rank():
    run = Run.load(horovod_file("modern_1rank"), cache=False)
    assert (run.tensor_ops["op"] == "BROADCAST").all()
    assert len(run.tensor_ops) == 322 and run.size == 1
    assert run.stragglers().empty  # one rank: nobody to be late for
    assert (run.fused_ops["activity"] == "MPI_BCAST").all()

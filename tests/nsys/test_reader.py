"""Reading a schema-exact export: NVTX (text and StringIds names, domains, categories, payloads),
kernels with their launching thread joined by correlation id, session start, schema version."""
from __future__ import annotations

from tests.nsys.fixture import SCHEMA_VERSION
from tracer import vocab
from viewer.nsys import reader as C
from viewer.nsys.mapping import ringscope_nvtx
from viewer.nsys.reader import read_report


def _pids(rep) -> list[int]:
    """Every process that recorded NVTX events or launched kernels, sorted."""
    return sorted(set(rep.nvtx["pid"].dropna().astype(int)) | set(rep.kernels["pid"].dropna().astype(int)))


def test_session_and_schema(per_rank):
    truth, _ = per_rank
    rep = read_report(truth.files[0])
    assert rep.schema_version == SCHEMA_VERSION
    assert rep.session_start_epoch_ns > 1_600_000_000 * 10**9
    assert _pids(rep) == [truth.pids[0]]


def test_nvtx_names_domains_categories_payloads(per_rank, run):
    truth, _ = per_rank
    rep = read_report(truth.files[0])
    rs = ringscope_nvtx(rep.nvtx)
    ranges = rs[rs["event_type"] == C.NVTX_STARTEND]
    assert len(ranges) == truth.nvtx_ranges[0]
    names = set(ranges["name"])
    # names stored through StringIds (textId) and inline (text) both come back
    assert vocab.FUSED_RESPONSE in names and vocab.RING_ALLREDUCE in names
    assert any(n.startswith(f"{vocab.STEP} ") for n in names)
    assert not any("grad.layer0" in n for n in names)   # a tensor's lifecycle is no NVTX range
    fused = ranges[ranges["name"] == vocab.FUSED_RESPONSE]
    assert set(fused["category"]) == {vocab.FUSED_RESPONSE}
    expected = set(run.fused_ops[run.fused_ops["rank"] == 0]["bytes"].astype(int))
    assert set(fused["payload"].dropna().astype(int)) == expected
    # the application's own default-domain range is read but is not ringscope's
    other = rep.nvtx[rep.nvtx["domain"].isna()]
    assert set(other["name"]) == {"train_step"} and set(other["event_type"]) == {C.NVTX_PUSHPOP}


def test_kernels_join_their_launching_thread(per_rank):
    truth, _ = per_rank
    rep = read_report(truth.files[1])
    k = rep.kernels
    assert len(k) == sum(1 for p in truth.kernels if p.rank == 1)
    pid = truth.pids[1]
    assert set(k["pid"]) == {pid}
    nccl = k[k["stream"] == 13]
    # NCCL kernels were launched from the backend thread, compute kernels from the framework thread
    assert set(nccl["launch_tid"]) == {pid + vocab.TID_BACKEND}
    assert set(k[k["stream"] == 7]["launch_tid"]) == {pid + vocab.TID_FRAMEWORK}
    assert set(k["api"]) == {"cudaLaunchKernel_v7000"}
    assert (k["launch_start"] < k["start"]).all()


def test_correlation_ids_join_within_their_process(combined):
    truth, path = combined
    rep = read_report(path)
    assert _pids(rep) == sorted(truth.pids.values())
    k = rep.kernels
    # CUPTI correlation ids restart per process, so both processes use the same ids
    assert k.groupby("pid")["correlation"].min().nunique() == 1
    assert len(k) == len(truth.kernels)          # no duplicated rows from a cross-process join
    for pid, g in k.groupby("pid"):
        assert g["launch_tid"].between(pid, pid + 10).all()

"""collectives.torch on a real CUDA device through the nccl backend, timeline on.

One rank: NCCL refuses two ranks on one GPU, and a test machine has at most one here. Skipped, with
this reason, where torch sees no CUDA device (CI and the development machines have none); the NCCL
code's logic is tested without a GPU in test_nccl_logic.py.
"""
import gzip
import json

import pytest

from tests.mpi_util import assert_check, run_suite

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no CUDA device: the nccl backend's GPU run needs one")

CHECKS = ["check_allreduce_dtypes_ops", "check_fused_bursts_stay_on_device", "check_other_ops",
          "check_distributed_optimizer_trains"]


@pytest.fixture(scope="module")
def cuda_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("cuda")
    results = run_suite(1, "torch_cuda.py", d / "results", timeout=300,
                        env={"RINGSCOPE_TIMELINE": str(d / "trace") + "/"})
    files = sorted((d / "trace").glob("rank-*.json*"))
    assert files, "no trace written"
    opener = gzip.open if files[0].suffix == ".gz" else open
    with opener(files[0], "rt") as f:
        events = json.load(f)
    return results, events["traceEvents"] if isinstance(events, dict) else events


@pytest.mark.parametrize("check", CHECKS)
def test_cuda_check(cuda_run, check):
    assert_check(cuda_run[0], check)


def test_trace_shows_nccl_spans_inside_fused_responses(cuda_run):
    events = cuda_run[1]
    nccl = [e for e in events if e.get("name") == "NCCL_ALLREDUCE" and e.get("ph") == "X"]
    fused = [e for e in events if e.get("name") == "FUSED_RESPONSE" and e.get("ph") == "X"]
    assert nccl and fused
    assert all(e["args"]["backend"] == "nccl" for e in fused if e["args"]["op"] == "ALLREDUCE")
    assert max(e["args"]["count"] for e in fused) > 1, "the bursts were never fused"
    prio = [e for e in fused if e["args"].get("priority") == 1]
    assert prio and all(e["args"]["count"] == 1 for e in prio), "priority 1 not in its own response"

"""The response cache and its bit rounds on real 2- and 3-rank jobs, cache on and off.

The 3-rank jobs run the same worker with the cache on and off: every result must match its numpy
reference in both, and the two launches' results must be identical bit for bit. The priority check
reads each rank's timeline file.
"""
import json

import pytest

from tests.mpi_util import assert_check, run_suite

CHECKS = ["every_op_dtype_set", "shape_change_invalidates", "mixed_cached_and_new",
          "join_while_cached", "priorities", "stall_names_missing_rank", "late_tensor_costs_no_cycle"]
CONFIGS = {"on3": (3, {}), "off3": (3, {"RINGSCOPE_CACHE_CAPACITY": 0}), "on2": (2, {})}


def _launch(name, tmp_path_factory):
    n, env = CONFIGS[name]
    d = tmp_path_factory.mktemp(name)
    (d / "tl").mkdir()
    res = run_suite(n, "runtime_cache.py", d / "results",
                    env={**env, "RINGSCOPE_TIMELINE": d / "tl" / "tl.json",
                         "RINGSCOPE_STALL_CHECK_TIME_SECONDS": 1,
                         "RINGSCOPE_STALL_SHUTDOWN_TIME_SECONDS": 30}, timeout=240)
    return res, d / "tl"


@pytest.fixture(scope="module")
def launches(tmp_path_factory):
    return {name: _launch(name, tmp_path_factory) for name in CONFIGS}


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("check", CHECKS)
def test_check(launches, config, check):
    assert_check(launches[config][0], check)


def test_cached_and_uncached_results_identical(launches):
    on, off = launches["on3"][0], launches["off3"][0]
    for r in on:
        a, b = on[r]["every_op_dtype_set"]["detail"], off[r]["every_op_dtype_set"]["detail"]
        assert a["digest"] == b["digest"], f"rank {r}: cached and uncached results differ"
        assert a["cached_responses"] > 0 and b["cached_responses"] == 0, (a, b)


def _responses(tl_dir):
    """{rank: [FUSED_RESPONSE args in time order]} from every rank's timeline file."""
    out = {}
    files = sorted(tl_dir.glob("*.json"))
    assert files, f"no timeline files in {tl_dir}"
    for f in files:
        data = json.loads(f.read_text())
        rank = data["otherData"]["ringscope"]["rank"]
        spans = sorted((e for e in data["traceEvents"] if e.get("name") == "FUSED_RESPONSE"),
                       key=lambda e: e["ts"])
        out[rank] = [e["args"] for e in spans]
    return out


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_priority_runs_first_in_its_own_response(launches, config):
    for rank, spans in _responses(launches[config][1]).items():
        for step in (100, 101):   # negotiated by rank 0, then from the cache (when on)
            mine = [a for a in spans if a.get("step") == step
                    and any(t.startswith("p.") for t in a["tensors"])]
            assert mine, (rank, step, "no response of the priority check in the trace")
            first = mine[0]
            assert first["tensors"] == ["p.hi"] and first["priority"] == 3, (rank, step, mine)
            rest = [t for a in mine[1:] for t in a["tensors"]]
            assert sorted(rest) == [f"p.lo.{i}" for i in range(6)], (rank, step, mine)
            assert all(a["priority"] == 0 for a in mine[1:]), (rank, step, mine)
            assert len(mine) == 2, f"rank {rank} step {step}: the low ones were not fused: {mine}"

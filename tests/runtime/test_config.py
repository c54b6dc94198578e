"""Environment parsing (no MPI needed) and the malformed-variable error at init (real ranks)."""
import json

import pytest

from collectives import config
from tests.mpi_util import SCRIPTS, run_mpi
from tracer import vocab as V


def test_defaults():
    cfg = config.load({})
    assert cfg.fusion_threshold == 128 * 1024 * 1024
    assert cfg.cycle_time_ms == 1.0 and cfg.stall_check_s == 60.0 and cfg.stall_shutdown_s == 0
    assert cfg.backend == "ring" and cfg.cache_capacity == 1024 and not cfg.mark_cycles
    assert cfg.switch_interval_ms == 0.5
    assert config.load({"RINGSCOPE_SWITCH_INTERVAL_MS": "0"}).switch_interval_ms == 0


def test_ringscope_wins_over_horovod_fallback():
    env = {"HOROVOD_FUSION_THRESHOLD": "1000", "HOROVOD_CYCLE_TIME": "2.5",
           "RINGSCOPE_CYCLE_TIME": "0.5", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "9",
           "HOROVOD_TIMELINE_MARK_CYCLES": "1", "RINGSCOPE_BACKEND": "MPI",
           "HOROVOD_STALL_CHECK_DISABLE": "1"}
    cfg = config.load(env)
    assert cfg.fusion_threshold == 1000 and cfg.cycle_time_ms == 0.5
    assert cfg.stall_shutdown_s == 9 and cfg.mark_cycles and cfg.backend == "mpi"
    assert cfg.stall_check_s == 0


@pytest.mark.parametrize("var,val,needle", [
    ("RINGSCOPE_FUSION_THRESHOLD", "lots", "is not an integer"),
    ("HOROVOD_FUSION_THRESHOLD", "1.5", "is not an integer"),
    ("RINGSCOPE_CYCLE_TIME", "fast", "is not a number"),
    ("RINGSCOPE_CYCLE_TIME", "-1", "must be >= 0"),
    ("RINGSCOPE_CACHE_CAPACITY", "x", "is not an integer"),
    ("RINGSCOPE_STALL_CHECK_TIME_SECONDS", "nan", "is not a number"),
    ("RINGSCOPE_BACKEND", "tcp", "is not one of"),
    ("RINGSCOPE_TIMELINE_MARK_CYCLES", "maybe", "is not a boolean"),
    ("HOROVOD_HIERARCHICAL_ALLREDUCE", "yes please", "is not a boolean"),
])
def test_malformed_value_names_variable(var, val, needle):
    with pytest.raises(config.ConfigError) as exc:
        config.load({var: val})
    assert var in str(exc.value) and needle in str(exc.value) and repr(val) in str(exc.value)


def test_hierarchical_allreduce_flag():
    assert not config.load({}).hierarchical_allreduce
    assert config.load({"HOROVOD_HIERARCHICAL_ALLREDUCE": "1"}).hierarchical_allreduce
    assert not config.load({"HOROVOD_HIERARCHICAL_ALLREDUCE": "1",
                            "RINGSCOPE_HIERARCHICAL_ALLREDUCE": "0"}).hierarchical_allreduce


def test_hierarchical_on_one_host_runs_flat_and_says_so(tmp_path):
    # (on several hosts: tests/cluster/test_two_hosts.py)
    trace = tmp_path / "trace"
    proc = run_mpi(2, [SCRIPTS / "runtime_init_only.py"], timeout=60,
                   env={"HOROVOD_HIERARCHICAL_ALLREDUCE": "1", "RINGSCOPE_TIMELINE": f"{trace}/"})
    assert proc.returncode == 0, proc.stdout
    for r in range(2):
        doc = json.loads((trace / f"rank-{r:05d}.json").read_text())
        meta = doc["otherData"]["ringscope"]
        assert meta["hierarchical_allreduce"] is False and meta["hierarchical_fallback"] == "one host"
        assert not [e for e in doc["traceEvents"] if e.get("name") in V.HIERARCHICAL_SUBPHASES]
        assert [e for e in doc["traceEvents"] if e.get("name") == V.RING_ALLREDUCE]


def test_malformed_env_fails_init_on_every_rank_without_traceback():
    proc = run_mpi(2, [SCRIPTS / "runtime_init_only.py"], timeout=60,
                   env={"RINGSCOPE_FUSION_THRESHOLD": "12MB"})
    assert proc.returncode != 0, proc.stdout
    assert "RINGSCOPE_FUSION_THRESHOLD='12MB' is not an integer" in proc.stdout, proc.stdout
    assert "Traceback" not in proc.stdout and "OK rank" not in proc.stdout, proc.stdout


def test_unwritable_timeline_fails_init_with_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    proc = run_mpi(2, [SCRIPTS / "runtime_init_only.py"], timeout=60,
                   env={"RINGSCOPE_TIMELINE": blocker / "sub" / "t.json"})
    assert proc.returncode != 0, proc.stdout
    assert "RINGSCOPE_TIMELINE" in proc.stdout and "Traceback" not in proc.stdout, proc.stdout

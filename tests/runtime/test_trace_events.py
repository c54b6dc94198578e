"""The runtime emits the tracer contract's events; response ids agree across ranks; clock sync."""
import json
import subprocess
import sys

import pytest

from tests.mpi_util import SCRIPTS, mpi_env, mpiexec, run_suite


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    return run_suite(3, "runtime_trace.py", tmp_path_factory.mktemp("trace"), timeout=90)


def test_events_follow_contract(suite):
    for r, res in suite.items():
        assert res["trace"]["ok"], f"rank {r}: {res['trace']['detail']['problems']}"


def test_response_ids_identical_on_every_rank(suite):
    ids = [res["trace"]["detail"]["response_ids"] for res in suite.values()]
    assert ids[0] and all(i == ids[0] for i in ids), ids
    assert suite[0]["trace"]["detail"]["max_fused"] > 1


def test_clock_offsets_recover_skew(tmp_path):
    """Ranks with a skewed clock (RINGSCOPE_TEST_CLOCK_SKEW_US) measure that skew against rank 0."""
    script = SCRIPTS / "runtime_trace.py"
    cmd = [mpiexec()]
    for r, skew in enumerate((0, 250_000, -40_000)):
        cmd += ["-n", "1", "-env", "RINGSCOPE_TEST_CLOCK_SKEW_US", str(skew), sys.executable,
                str(script)] + ([":"] if r < 2 else [])
    proc = subprocess.run(cmd, env=mpi_env({"RESULTS_DIR": tmp_path}), capture_output=True,
                          text=True, timeout=90)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for r, skew in enumerate((0, 250_000, -40_000)):
        clock = json.loads((tmp_path / f"rank-{r}.json").read_text())["trace"]["detail"]["clock"]
        for when in ("init", "shutdown"):
            offset, unc = clock[when]
            assert abs(offset - skew * 1000) <= max(unc, 0) + 2_000_000, (r, when, clock)
            assert 0 <= unc < 50_000_000

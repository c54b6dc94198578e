"""An elastic job on 2 namespaced hosts x 2 slots: a SIGKILLed rank on the second host costs that
host one slot and the job finishes on 3 ranks from the last commit."""
from __future__ import annotations

import json
import sys

from collectives.launcher import run_job
from tests.mpi_util import ROOT, mpi_env


def test_elastic_job_loses_a_slot_of_a_namespaced_host(two_hosts, tmp_path):
    hosts = ",".join(f"{h['name']}:{h['slots']}" for h in two_hosts["hosts"])
    second = two_hosts["hosts"][1]["name"]
    cmd = [sys.executable, "-m", "collectives.launcher", "--elastic", "--cluster", "-H", hosts,
           "-np", "4", "--min-np", "2", "--timeline", f"{tmp_path}/tl/",
           str(ROOT / "tests" / "elastic" / "train_numpy.py"), "--log", str(tmp_path / "log.jsonl"),
           "--steps", "20", "--kill-rank", "3", "--kill-at-step", "5", "--step-sleep", "0.05"]
    rc, out = run_job(cmd, mpi_env({"OMP_NUM_THREADS": "1"}), 240, cwd=ROOT)
    assert rc == 0, out[-4000:]
    journal = json.loads((tmp_path / "tl" / "elastic.json").read_text())
    (reset,) = journal["resets"]
    assert reset["lost"][0]["rank"] == 3 and reset["lost"][0]["host"] == second
    assert "killed by signal 9" in reset["cause"]
    assert reset["hosts_after"] == [f"{two_hosts['hosts'][0]['name']}:2", f"{second}:1"]
    log = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert log[-1]["step"] == 20 and log[-1]["size"] == 3
    assert min(x["step"] for x in log if x["gen"] == 1) == 5, "from the commit at step 4"
    for p in (tmp_path / "tl" / "gen-001").iterdir():
        meta = json.loads(p.read_text())["otherData"]["ringscope"]
        assert meta["generation"] == 1 and meta["size"] == 3

"""The Horovod-style example runs unchanged (but for its import line) under `ringscope run -np 4`."""
import json
import subprocess
import sys

from tests.mpi_util import ROOT, mpi_env
from tracer import vocab as v

EXAMPLE = ROOT / "examples" / "pytorch_synthetic_benchmark.py"


def test_example_differs_from_horovod_only_by_the_import():
    text = EXAMPLE.read_text()
    assert "import collectives.torch as hvd" in text
    imports = [ln.split("#")[0] for ln in text.splitlines() if ln.startswith(("import ", "from "))]
    assert not [ln for ln in imports if "horovod" in ln]
    for step in ("hvd.init()", "torch.cuda.set_device(hvd.local_rank())", "* hvd.size()",
                 "hvd.DistributedOptimizer(", "named_parameters=model.named_parameters()",
                 "hvd.broadcast_parameters(", "hvd.broadcast_optimizer_state(",
                 "DistributedSampler("):
        assert step in text, step


def test_example_runs_on_four_ranks(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "collectives.launcher", "-np", "4", "--timeline", f"{tmp_path}/",
         str(EXAMPLE), "--epochs", "1", "--samples", "256"],
        cwd=tmp_path, env=mpi_env({"RINGSCOPE_STALL_SHUTDOWN_TIME_SECONDS": "30"}),
        capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "epoch 0: loss" in proc.stdout
    assert "weights identical on all ranks: True" in proc.stdout
    assert sorted(p.name for p in tmp_path.glob("rank-*.json")) == \
        [f"rank-{r:05d}.json" for r in range(4)]
    for f in tmp_path.glob("rank-*.json"):    # 256 samples / 4 ranks / 32 = 2 steps per rank
        names = [e["name"] for e in json.loads(f.read_text())["traceEvents"]
                 if e.get("cat") == v.CAT_PHASE]
        loop = (v.DATA_WAIT, v.FORWARD, v.BACKWARD, v.OPTIMIZER_STEP)
        assert {n: names.count(n) for n in loop} == {v.DATA_WAIT: 3, v.FORWARD: 2,
                                                      v.BACKWARD: 2, v.OPTIMIZER_STEP: 2}, f

"""DistributedOptimizer records BACKWARD (per backward pass) and OPTIMIZER_STEP (per step, holding
the step's SYNCHRONIZE waits) on 2 real ranks, in a script that never calls hvd.timeline."""
from __future__ import annotations

import json

from tests.mpi_util import SCRIPTS, run_mpi
from tracer import vocab as v

STEPS = 4   # tests/mpi_scripts/torch_phases.py: steps -1..2 with 1 pass, then 3..6 with 2


EPS = 0.002   # µs: ts and dur are written in ns, their sum is rounded once more


def _inside(inner, outer):
    return outer["ts"] - EPS <= inner["ts"] and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + EPS


def test_backward_and_optimizer_step_per_step_on_two_ranks(tmp_path):
    proc = run_mpi(2, [SCRIPTS / "torch_phases.py"],
                   env={"RINGSCOPE_TIMELINE": f"{tmp_path}/", "OMP_NUM_THREADS": "1",
                        "RINGSCOPE_STALL_SHUTDOWN_TIME_SECONDS": "30"}, timeout=240)
    assert proc.returncode == 0, proc.stdout[-4000:]
    for rank in range(2):
        evs = json.loads((tmp_path / f"rank-{rank:05d}.json").read_text())["traceEvents"]
        xs = [e for e in evs if e["ph"] == "X" and e["tid"] == v.TID_FRAMEWORK]
        assert not [e for e in xs if e["name"] in (v.FORWARD, v.DATA_WAIT)]   # nothing watched
        by_step: dict[int, dict[str, list]] = {}
        for e in xs:
            by_step.setdefault(e["args"]["step"], {}).setdefault(e["name"], []).append(e)
        waited = 0
        for step in range(-1, 2 * STEPS - 1):
            got = by_step[step]
            passes = 1 if step < STEPS - 1 else 2
            back, (opt,) = got[v.BACKWARD], got[v.OPTIMIZER_STEP]
            assert len(back) == passes, (rank, step, len(back))
            assert all(b["cat"] == v.CAT_PHASE and b["dur"] > 0 for b in back + [opt])
            assert back[-1]["ts"] + back[-1]["dur"] <= opt["ts"] + EPS     # backward, then the step
            # the step's waits are inside OPTIMIZER_STEP (broadcasts before training are not)
            # (a handle already done when synchronize comes records no wait: some steps have none)
            syncs = [s for s in got.get(v.SYNCHRONIZE, []) if s["ts"] > back[0]["ts"]]
            assert all(_inside(s, opt) for s in syncs), (rank, step)
            waited += bool(syncs)
            if step >= 0:
                (span,) = got[v.STEP]
                assert all(_inside(e, span) for e in back + [opt] + syncs)
        assert waited >= STEPS, (rank, waited)   # most steps waited on their gradients
        # every span on the framework thread nests (Perfetto draws them in one track)
        xs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack: list = []
        for e in xs:
            while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"] + EPS:
                stack.pop()
            assert not stack or _inside(e, stack[-1]), (e, stack[-1])
            stack.append(e)

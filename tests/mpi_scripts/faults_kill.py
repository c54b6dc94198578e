"""Worker: training-like steps of allreduces, and one fault (env $FAULT) in the first step that starts
$FAULT_AFTER_S into the run on rank $VICTIM (after a few timeline flushes):

- ``kill``: rank $VICTIM SIGKILLs itself after submitting half of that step's gradients; mpiexec then
  kills every other rank at once.
- ``freeze``: rank $VICTIM stops itself (SIGSTOP) at the start of that step, before it submits: no
  collective of its is in flight (the stall shutdown fails negotiations, not a ring transfer that a
  stopped peer never finishes, so a stop mid-transfer would leave the others waiting). They stall until the stall
  shutdown (RINGSCOPE_STALL_SHUTDOWN_TIME_SECONDS, run by rank 0: the victim must not be rank 0) fails
  their ops; they go on for $AFTER_ERROR_S, close their timelines, the lowest of them SIGKILLs the
  victim once all of them closed, and each leaves at once (MPI_Finalize would wait for the dead rank).
"""
import os
import signal
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import collectives as C  # noqa: E402
import tracer  # noqa: E402

C.init()
r = C.rank()
fault, victim = os.environ["FAULT"], int(os.environ["VICTIM"])
fault_at = time.monotonic() + float(os.environ["FAULT_AFTER_S"])
pid_file = os.path.join(os.environ["RINGSCOPE_TIMELINE"], "victim.pid")
if r == victim:
    with open(pid_file, "w") as f:
        f.write(str(os.getpid()))
try:
    step = 0
    while True:
        C.mark_step(step)
        time.sleep(0.02)   # the step's compute
        faulty = r == victim and time.monotonic() >= fault_at
        hs = []
        for i in range(8):
            if faulty and i == (4 if fault == "kill" else 0):
                os.kill(os.getpid(), signal.SIGKILL if fault == "kill" else signal.SIGSTOP)
            hs.append(C.allreduce_async(np.full(1000 + i, float(r)), name=f"grad.{i}"))
        for h in hs:
            C.synchronize(h)
        C.allreduce(np.ones(1), name="loss")
        step += 1
except C.CollectiveError as exc:
    print(f"rank {r}: {exc}", flush=True)
    time.sleep(float(os.environ.get("AFTER_ERROR_S", "0")))
    tracer.close()
    open(f"{pid_file}.closed-{r}", "w").close()
    survivors = set(range(C.size())) - {victim}
    if r == min(survivors):   # once every survivor closed its trace (mpiexec then ends the job)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not all(os.path.exists(f"{pid_file}.closed-{s}") for s in survivors):
            time.sleep(0.05)
        with open(pid_file) as f:
            os.kill(int(f.read()), signal.SIGKILL)
    os._exit(0)

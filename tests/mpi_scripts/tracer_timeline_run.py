"""Worker for the tracer's multi-rank tests: real ranks, real engine, timeline on.

Modes (argv[1]):
  steps N    run N training-like steps (several allreduces per step, fused), then shut down;
             writes $RESULTS_DIR/submitted-<rank>.json with the tensor names it submitted.
  forever    like steps, until killed; writes $RESULTS_DIR/pid-<rank> and, after 2.5 s, ready-<rank>.
TRACER_TEST_SKEW="R:US" skews rank R's wall clock by US microseconds (RINGSCOPE_TEST_CLOCK_SKEW_US,
set here before tracer is imported because the launcher gives every rank the same environment).
With RINGSCOPE_NVTX_ALWAYS=1, "steps" also writes $RESULTS_DIR/nvtx-<rank>.json: the NVTX calls the
runtime made (the emitter's log), to check that its spans are NVTX ranges too.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

_rank = int(os.environ.get("PMI_RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0")))
_skew = os.environ.get("TRACER_TEST_SKEW")
if _skew and int(_skew.split(":")[0]) == _rank:
    os.environ["RINGSCOPE_TEST_CLOCK_SKEW_US"] = _skew.split(":")[1]

import numpy as np  # noqa: E402

import collectives as C  # noqa: E402

SIZES = [1000, 5000, 300, 20000, 64, 4096]
DTYPES = ["float32", "float32", "float64", "float32", "int32", "float32"]


def one_step(step):
    handles = []
    for i, (n, dt) in enumerate(zip(SIZES, DTYPES)):
        a = np.full(n, C.rank() + step, dtype=dt)
        handles.append((f"grad.{i}", C.allreduce_async(a, name=f"grad.{i}", op=C.Sum)))
    for name, h in handles:
        out = C.synchronize(h)
        expect = sum(r + step for r in range(C.size()))
        assert float(out[0]) == expect, (name, out[0], expect)
    C.mark_step()
    return [n for n, _ in handles]


def _open_ranges(log) -> set:
    """The names of the NVTX ranges in ``log`` that are still open."""
    ended = {e[1] for e in list(log) if e[0] == "end"}
    return {e[3] for e in list(log) if e[0] == "start" and e[1] not in ended}


def main():
    mode = sys.argv[1]
    out_dir = os.environ["RESULTS_DIR"]
    C.init()
    r = C.rank()
    if mode == "steps":
        import tracer
        emitter = tracer.get_recorder().emitter
        if emitter is not None:
            emitter.log = []          # before any range opens: logged handles carry their index
        submitted = []
        C.mark_step()
        for step in range(int(sys.argv[2])):
            submitted += one_step(step)
        with open(os.path.join(out_dir, f"submitted-{r}.json"), "w") as f:
            json.dump(sorted(set(submitted)), f)
        if emitter is not None:
            # the handles complete before the engine's thread closes the response's range: let it close them
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and _open_ranges(emitter.log) - {"STEP"}:
                time.sleep(0.001)
            with open(os.path.join(out_dir, f"nvtx-{r}.json"), "w") as f:
                json.dump(emitter.log, f)
        C.shutdown()
        return
    with open(os.path.join(out_dir, f"pid-{r}"), "w") as f:
        f.write(str(os.getpid()))
    t0 = time.monotonic()
    step = 0
    C.mark_step()
    while time.monotonic() - t0 < 120:
        one_step(step)
        step += 1
        if time.monotonic() - t0 > 2.5 and not os.path.exists(os.path.join(out_dir, f"ready-{r}")):
            open(os.path.join(out_dir, f"ready-{r}"), "w").close()
    C.shutdown()


if __name__ == "__main__":
    main()

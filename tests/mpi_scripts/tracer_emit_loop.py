"""Emit tensor ops forever (or for --seconds) with the timeline on; used by the crash/exit tests.

Each op's SUBMIT instant carries ``args.wall_ns`` (tracer.clock.wall_ns at that moment), so a test can
tell how much of the run before a kill made it to disk. Prints ``ready`` once it has run
``--ready-after`` seconds. ``--own-sigterm FILE`` installs a SIGTERM handler *before* the tracer that
writes FILE and exits 3, to check that the tracer chains to it.
"""
import argparse
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import tracer  # noqa: E402
from tracer import clock  # noqa: E402
from tracer import vocab as v  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--ready-after", type=float, default=1.5)
    ap.add_argument("--own-sigterm")
    a = ap.parse_args()
    if a.own_sigterm:
        def own(signum, frame):
            with open(a.own_sigterm, "w") as f:
                f.write("called")
            sys.exit(3)
        signal.signal(signal.SIGTERM, own)
    rec = tracer.configure({"rank": int(os.environ.get("FAKE_RANK", "0")), "size": 1})
    t_end = time.monotonic() + a.seconds
    t_ready = time.monotonic() + a.ready_after
    i = 0
    while time.monotonic() < t_end:
        name = f"allreduce.t{i % 16}"
        rec.instant(v.TID_FRAMEWORK, v.SUBMIT, v.CAT_FRAMEWORK, {"tensor": name, "wall_ns": clock.wall_ns()})
        with rec.span(v.TID_BACKEND, v.RING_ALLREDUCE, v.CAT_COMM, {"tensor": name, "bytes": 64}):
            time.sleep(0.001)
        i += 1
        if i % 50 == 0:
            tracer.mark_step()
        if t_ready and time.monotonic() > t_ready:
            print("ready", flush=True)
            t_ready = None
    tracer.close()


if __name__ == "__main__":
    main()

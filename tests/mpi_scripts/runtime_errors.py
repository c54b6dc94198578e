"""Worker: every cross-rank error ends quickly with the same clear error on every rank.

Runs with RINGSCOPE_STALL_SHUTDOWN_TIME_SECONDS=1.5 and RINGSCOPE_STALL_CHECK_TIME_SECONDS=0.5.
"""
import os
import sys
import time
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import collectives as C  # noqa: E402
from tests.mpi_util import write_results  # noqa: E402

results = {}


def check(name, fn):
    try:
        fn()
        results[name] = {"ok": True, "detail": ""}
    except Exception as exc:
        results[name] = {"ok": False, "detail": f"{type(exc).__name__}: {exc}\n"
                                                f"{traceback.format_exc()[-1200:]}"}


def expect_error(submit, *needles, within=3.0):
    """Run ``submit()`` (returns a handle) and require a CollectiveError naming ``needles``."""
    t0 = time.monotonic()
    h = submit()
    try:
        C.synchronize(h)
    except C.CollectiveError as exc:
        took = time.monotonic() - t0
        msg = str(exc)
        missing = [n for n in needles if n not in msg]
        if missing:
            raise AssertionError(f"error {msg!r} does not mention {missing}") from exc
        if took > within:
            raise AssertionError(f"error took {took:.2f}s (> {within}s): {msg}") from exc
        return msg
    raise AssertionError("no error raised")


def main():
    C.init()
    r, size = C.rank(), C.size()

    def mismatch_shape():
        msg = expect_error(lambda: C.allreduce_async(np.ones(3 + (r == 1)), name="bad.shape"),
                           "bad.shape", "shape", "rank 1", "(4,)", "(3,)")
        assert msg.count("\n") == 0, msg
    check("mismatch_shape", mismatch_shape)

    check("mismatch_dtype", lambda: expect_error(
        lambda: C.allreduce_async(np.ones(4, np.float32 if r else np.float64), name="bad.dtype"),
        "bad.dtype", "dtype", "float32", "float64"))
    check("mismatch_op", lambda: expect_error(
        lambda: C.allreduce_async(np.ones(4), name="bad.op", op=C.Max if r == 0 else C.Sum),
        "bad.op", "reduce op", "rank 0"))
    check("mismatch_root", lambda: expect_error(
        lambda: C.broadcast_async(np.ones(4), root_rank=min(r, 1), name="bad.root"),
        "bad.root", "root"))
    check("mismatch_scale", lambda: expect_error(
        lambda: C.allreduce_async(np.ones(4), name="bad.scale", prescale_factor=1.0 + r),
        "bad.scale", "prescale"))
    check("mismatch_op_type", lambda: expect_error(
        lambda: (C.allreduce_async(np.ones((2, 2)), name="bad.kind") if r == 0
                 else C.allgather_async(np.ones((2, 2)), name="bad.kind")),
        "bad.kind", "op type"))
    check("mismatch_allgather_trailing", lambda: expect_error(
        lambda: C.allgather_async(np.ones((2, 2 + r)), name="bad.ag"), "bad.ag", "shape"))

    def grouped_mismatch():
        arrays = [np.ones(3), np.ones(4 + (r == 1)), np.ones(2)]   # member 1 differs on rank 1
        t0 = time.monotonic()
        h = C.grouped_allreduce_async(arrays, name="grp.bad")
        errors = []
        for member in h.handles:
            try:
                member.wait(timeout=5)
            except C.CollectiveError as exc:
                errors.append(str(exc))
        assert len(errors) == 3, errors
        assert all("grp.bad.1" in e for e in errors), errors
        assert time.monotonic() - t0 < 3, "group error was slow"
    check("grouped_mismatch_fails_group", grouped_mismatch)

    def still_works():
        y = C.allreduce(np.ones(5), op=C.Sum, name="after.errors")
        assert (y == size).all(), y
    check("works_after_errors", still_works)

    def bad_local_input():
        for call, needle in ((lambda: C.broadcast_async(np.ones(2), root_rank=size), "root_rank"),
                             (lambda: C.alltoall_async(np.ones((3, 1)), splits=[5] * size),
                              "splits"),
                             (lambda: C.allreduce_async([1, 2, 3]), "numpy array"),
                             (lambda: C.allgather_async(np.float64(2.0)), "scalar"),
                             (lambda: C.allreduce_async(np.ones(2), op="Median"), "Median")):
            try:
                call()
            except (ValueError, TypeError) as exc:
                assert needle in str(exc), (needle, exc)
            else:
                raise AssertionError(f"accepted bad input ({needle})")
    check("bad_local_input", bad_local_input)

    def stall_shutdown():
        # rank 0 submits a tensor nobody else does; every other rank waits on one rank 0 never
        # submits: after the stall shutdown time every pending handle raises
        name = "stall.lonely.0" if r == 0 else "stall.others"
        msg = expect_error(lambda: C.allreduce_async(np.ones(2), name=name), "stall", name,
                           within=6.0)
        assert "ranks" in msg, msg
    check("stall_shutdown", stall_shutdown)

    def works_after_stall():
        y = C.allreduce(np.ones(2), op=C.Sum, name="after.stall")
        assert (y == size).all(), y
    check("works_after_stall", works_after_stall)

    C.shutdown()
    write_results(results)


if __name__ == "__main__":
    main()

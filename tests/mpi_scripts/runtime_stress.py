"""Worker: randomized interleaving of allreduce/allgather/broadcast over overlapping process sets,
with per-rank random delays and out-of-order synchronization; every result is checked.

The op sequence comes from one seed shared by all ranks; delays and wait order are per rank.
"""
import os
import random
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import collectives as C  # noqa: E402
from tests.mpi_util import write_results  # noqa: E402

DTYPES = ["float32", "float64", "int32", "int64", "uint8", "float16"]


def main():
    from mpi4py import MPI
    n = MPI.COMM_WORLD.Get_size()
    sets = [C.ProcessSet([0, n - 1]), C.ProcessSet(range(1, n))]
    C.init(process_sets=sets)
    r = C.rank()
    shared, local = random.Random(1234), random.Random(r)
    wrong, count = [], 0
    for it in range(30):
        ops = []
        for k in range(shared.randint(1, 25)):
            ps = shared.choice([None, sets[0], sets[1]])
            members = list(range(n)) if ps is None else ps.ranks
            kind = shared.choice(["ar", "ar", "ar", "ag", "bc"])
            dt, ln = shared.choice(DTYPES), shared.choice([1, 3, 17, 1000, 70000])
            root = shared.randrange(len(members))
            name = f"s{it}.{k}"
            if r not in members:
                continue
            if local.random() < 0.3:
                time.sleep(local.random() * 0.002)
            base = np.arange(ln) % 7
            if kind == "ar":
                h = C.allreduce_async((base + r).astype(dt), name=name, op=C.Sum, process_set=ps)
                exp = sum(base + q for q in members).astype(dt)
            elif kind == "ag":
                h = C.allgather_async(np.full((r % 3 + 1, 2), r, dtype=dt), name=name,
                                      process_set=ps)
                exp = np.concatenate([np.full((q % 3 + 1, 2), q, dtype=dt) for q in members])
            else:
                h = C.broadcast_async((base + r).astype(dt), root, name=name, process_set=ps)
                exp = (base + members[root]).astype(dt)
            ops.append((h, exp, name))
        local.shuffle(ops)
        for h, exp, name in ops:
            got = C.synchronize(h)
            count += 1
            if not np.array_equal(got, exp):
                wrong.append(f"{name}: got {got.reshape(-1)[:4]} expected {exp.reshape(-1)[:4]}")
    C.shutdown()
    write_results({"stress": {"ok": not wrong and count > 50,
                              "detail": f"{count} ops; wrong: {wrong[:5]}"}})


if __name__ == "__main__":
    main()

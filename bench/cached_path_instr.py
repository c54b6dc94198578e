"""Instructions per tensor of the engine's cached path alone: the submissions routed under their
cache bits (``Engine._route``), the round's words, its decode and the plan of the fused responses
(``BitRounds.responses``), for one simulated rank whose round found everything ready.

    .venv/bin/python -m bench.cached_path_instr [--tensors 92]

The engine thread's count in bench/per_tensor_cpu.py includes its polling, which follows the timing
(±20 % between runs); this part of it has no waits, so its count repeats. Two runs under
``valgrind --tool=callgrind`` at different cycle counts; their difference over the tensors.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from types import SimpleNamespace


def _cycles(tensors: int, cycles: int) -> None:
    from bench import negotiation_scale as N
    from collectives.engine import Engine
    entries = N._entries(tensors, nbytes=64)
    rounds = N._rounds(2, entries)
    engine = SimpleNamespace(_rounds=rounds, sets=N._Sets(2))   # what Engine._route reads
    threshold = N.cfg_threshold()
    for _ in range(cycles):
        assert not Engine._route(engine, entries)
        res = rounds.decode(rounds.vector())   # (every rank submitted the same: AND = own words)
        out = rounds.responses(0, res.ready[0], threshold, 0)
        assert [len(e) for _, e in out] == [tensors]


def _instructions(tensors: int, cycles: int, tmp: str) -> int:
    out = os.path.join(tmp, f"cg.{cycles}")
    code = f"import bench.cached_path_instr as b; b._cycles({tensors}, {cycles})"
    run = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                          sys.executable, "-c", code], capture_output=True, text=True)
    if run.returncode:
        raise SystemExit(run.stderr[-2000:])
    with open(out) as f:
        return int(re.search(r"^summary: (\d+)", f.read(), re.M).group(1))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tensors", type=int, default=92)
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        lo, hi = _instructions(a.tensors, 10, tmp), _instructions(a.tensors, 210, tmp)
    json.dump({"tensors": a.tensors, "instr_per_tensor": round((hi - lo) / (200 * a.tensors))}, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())

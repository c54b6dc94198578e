"""``python -m bench``: run the measurement groups side by side, print a table, write JSON.

    python -m bench [--quick] [--only allreduce,fusion,...] [--json PATH] [--check [--strict]]

``--check`` exits 1 when a ratio target is missed (``--strict``: absolute targets too), naming the
target, the measured value and by how much. Groups whose parts are missing are reported, not faked.
An optional group that skips itself (``horovod`` without its venv) says why; its targets are gated
only when the group was named in ``--only``.
"""
from __future__ import annotations

import argparse
import datetime
import importlib
import os
import shlex
import sys
import time

from bench import machine, report, targets

GROUPS = ("allreduce", "fusion", "negotiation", "tracer", "analyzer", "dashboard", "horovod", "kineto",
          "multihost")
OPT_IN = ("whatif", "scale")   # only with --only: minutes of real 4-rank reruns; tens of minutes at 1,024 ranks
MODULE = {"allreduce": "bench.allreduce", "fusion": "bench.fusion", "horovod": "bench.yardstick",
          "negotiation": "bench.negotiation_scale", "tracer": "bench.tracer",
          "analyzer": "bench.analyzer", "dashboard": "bench.dashboard", "kineto": "bench.kineto",
          "whatif": "bench.whatif_accuracy", "multihost": "bench.multihost", "scale": "bench.scale"}


def parse(argv):
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes and few reps (~2-3 min)")
    ap.add_argument("--only", default="", help=f"comma-separated groups of: {', '.join(GROUPS + OPT_IN)}")
    ap.add_argument("--json", metavar="PATH", help="write the full results here")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 when a ratio target is missed")
    ap.add_argument("--strict", action="store_true",
                    help="with --check, gate the absolute targets (times, rates) too")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    ns = parse(sys.argv[1:] if argv is None else argv)
    groups = [g.strip() for g in ns.only.split(",") if g.strip()] or list(GROUPS)
    bad = [g for g in groups if g not in GROUPS + OPT_IN]
    if bad:
        print(f"bench: unknown group {bad[0]!r}; use one of {', '.join(GROUPS + OPT_IN)}", file=sys.stderr)
        return 2
    m = machine.describe()
    result = {"date": datetime.date.today().isoformat(),
              "command": "python -m bench " + " ".join(shlex.quote(a) for a in
                                                       (sys.argv[1:] if argv is None else argv)),
              "quick": ns.quick, "machine": m, "machine_line": machine.one_line(m), "groups": {}}
    metrics, skipped = {}, []
    for g in groups:
        print(f"[bench] {g} ...", file=sys.stderr, flush=True)
        t0 = time.monotonic()
        try:
            res = importlib.import_module(MODULE[g]).run(ns.quick)
        except Exception as exc:  # one broken group must not hide the others
            res = {"rows": [], "metrics": {}, "notes": [f"group failed: {type(exc).__name__}: "
                                                        f"{str(exc)[:2000]}"]}
        res["seconds"] = time.monotonic() - t0
        result["groups"][g] = res
        if res.get("skipped"):
            skipped.append(g)
            print(f"[bench] {g}: {res['skipped']}", file=sys.stderr, flush=True)
        metrics.update(res.get("metrics", {}))
    result["machine"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    named = [g.strip() for g in ns.only.split(",") if g.strip()]
    result["verdicts"] = targets.evaluate(metrics, [g for g in groups
                                                    if g not in skipped or g in named])
    print(report.render(result))
    if ns.json:
        report.write_json(result, ns.json)
    if ns.check:
        fails = targets.gating(result["verdicts"], ns.strict)
        for v in fails:
            what = "not measured" if v["value"] is None else \
                f"measured {v['value']:.3g}{v['unit']}, missed by {v['by']:.2f}x"
            print(f"bench --check: MISS {v['metric']}: target {v['op']} {v['limit']:g}{v['unit']} "
                  f"({v['target']}); {what}", file=sys.stderr)
        if fails:
            return 1
        print("bench --check: all gated targets met", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

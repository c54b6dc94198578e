"""``ringscope tune RUN [--json]``: search fusion threshold x cycle time on the what-if model."""
from __future__ import annotations

import argparse
import json
import sys

# The viewer's modules load inside main, once the arguments parse: --help and a bad argument answer
# without pandas.


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="ringscope tune", description=(
        "Search fusion threshold x cycle time on the replay model of a traced run."))
    p.add_argument("paths", nargs="+", help="a run directory, or trace files (ringscope or Horovod)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    args = p.parse_args(argv)
    from viewer.cli.whatif import load_model

    model, err = load_model(args.paths)
    if err:
        print(f"ringscope: {err}", file=sys.stderr)
        return 2
    from viewer.whatif.tune import tune

    res = tune(model)
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    cur, best = res["current"], res["best"]
    print(f"measured {res['measured_step_ms']:.1f} ms per step; replayed {res['baseline_step_ms']:.1f} ms")
    print(f"current:  fusion threshold {cur['fusion_threshold'] / 2**20:g} MiB, cycle {cur['cycle_time_ms']:g} ms"
          f" -> {cur['predicted_step_ms']:.1f} ms")
    print(f"best:     fusion threshold {best['fusion_threshold'] / 2**20:g} MiB, cycle {best['cycle_time_ms']:g} ms"
          f" -> {best['predicted_step_ms']:.1f} ms ({res['gain_pct']:+.1f} %)")
    if res["assumed"]:
        print(f"          (current settings not in the trace, the defaults assumed: {', '.join(res['assumed'])})")
    conf = res["confidence"]
    run_up = conf["runner_up"]
    if best is cur:
        print(f"keep the current settings (no setting of the grid is predicted faster by more than "
              f"{conf['keep_pct']:.1f} %, the model's error on this run)")
    print(f"confidence: {conf['level']} - the best leads the runner-up (fusion threshold "
          f"{run_up['fusion_threshold'] / 2**20:g} MiB, cycle {run_up['cycle_time_ms']:g} ms, "
          f"{run_up['predicted_step_ms']:.1f} ms) by {conf['lead_pct']:.1f} %; the model's median error per step "
          f"on this run is {conf['model_error_pct']:.1f} %; {conf['within_error']} setting(s) of the grid "
          f"lie within it of the best, {conf['same_as_best']} predicted the same as the best")
    print(f"\napply:    {res['apply']['ringscope_run']} ...")
    print(f"          {res['apply']['env']}")
    print(f"          {res['apply']['horovod_env']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

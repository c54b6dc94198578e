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
    from viewer.units import UNITS, pct, size

    ms = UNITS["ms"]

    def setting(r):
        return f"fusion threshold {size(r['fusion_threshold'])}, cycle {ms(r['cycle_time_ms'])}"

    cur, best = res["current"], res["best"]
    measured = ("– (the trace marks no steps)" if res["measured_step_ms"] is None
                else f"{ms(res['measured_step_ms'])} per step")
    print(f"measured {measured}; replayed {ms(res['baseline_step_ms'])} (medians over the steps)")
    print(f"current:  {setting(cur)} -> {ms(cur['predicted_step_ms'])}")
    print(f"best:     {setting(best)} -> {ms(best['predicted_step_ms'])} ({'+' if res['gain_pct'] > 0 else ''}"
          f"{pct(res['gain_pct'])})")
    if res["assumed"]:
        print(f"          (current settings not in the trace, the defaults assumed: {', '.join(res['assumed'])})")
    conf = res["confidence"]
    run_up = conf["runner_up"]
    if best is cur:
        print(f"keep the current settings (no setting of the grid is predicted faster by more than "
              f"{pct(conf['keep_pct'])}, the model's error on this run)")
    print(f"confidence: {conf['level']} - the best leads the runner-up ({setting(run_up)}, "
          f"{ms(run_up['predicted_step_ms'])}) by {pct(conf['lead_pct'])}; the model's median error per step "
          f"on this run is {pct(conf['model_error_pct'])}; {conf['within_error']} setting(s) of the grid "
          f"lie within it of the best, {conf['same_as_best']} predicted the same as the best")
    print(f"\napply:    {res['apply']['ringscope_run']} ...")
    print(f"          {res['apply']['env']}")
    print(f"          {res['apply']['horovod_env']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

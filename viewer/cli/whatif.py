"""``ringscope whatif RUN [options] [--json]``: predict a run's step time under other settings."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# The viewer's modules load inside the functions, once the arguments parse: --help and a bad argument
# answer without pandas.


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ringscope whatif", description=(
        "Replay a traced run under other settings and predict its step time."))
    p.add_argument("paths", nargs="+", help="a run directory, or trace files (ringscope or Horovod)")
    p.add_argument("--fusion-threshold-mb", type=float, metavar="X", help="fusion threshold in MiB (0: off)")
    p.add_argument("--cycle-time-ms", type=float, metavar="Y", help="engine cycle time in ms")
    p.add_argument("--no-straggler", action="store_true", help="every rank's compute as the median rank's")
    p.add_argument("--bandwidth-scale", type=float, default=1.0, metavar="K", help="K x the bandwidth")
    p.add_argument("--latency-scale", type=float, default=1.0, metavar="K", help="K x the latency")
    p.add_argument("--ranks", type=int, metavar="N", help="predict for N ranks (ring cost model; an extrapolation)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    return p


def load_model(paths):
    """(model, None) or (None, one line naming the problem)."""
    from viewer.errors import TraceError, show_warnings_on_stderr
    from viewer.run import Run
    from viewer.whatif import ModelError, fit

    show_warnings_on_stderr()
    src = paths[0] if len(paths) == 1 else paths
    try:
        src = _one_world(src)
        return fit(Run.load(src)), None
    except TraceError as exc:
        return None, str(exc)
    except ModelError as exc:
        return None, f"{' '.join(map(str, paths))}: {exc}"


def _one_world(src):
    """An elastic run's last generation (the replay models one world); any other source as it is."""
    from viewer.ringscope import elastic

    if not isinstance(src, (str, Path)) or not elastic.is_elastic(src):
        return src
    last = elastic.read_manifest(src)["generations"][-1]
    d = elastic.generation_dir(src, last["generation"])
    print(f"ringscope: {src} is an elastic run: replaying its last generation ({d}, {last['size']} ranks); "
          f"its resets: ringscope summarize {src}", file=sys.stderr)
    return d


def _settings(args, p):
    from viewer.whatif import Settings

    for name in ("fusion_threshold_mb", "cycle_time_ms"):
        v = getattr(args, name)
        if v is not None and v < 0:
            p.error(f"--{name.replace('_', '-')} must be >= 0")
    if args.bandwidth_scale <= 0 or args.latency_scale <= 0:
        p.error("--bandwidth-scale and --latency-scale must be > 0")
    if args.ranks is not None and args.ranks < 2:
        p.error("--ranks must be at least 2")
    thr = None if args.fusion_threshold_mb is None else int(args.fusion_threshold_mb * (1 << 20))
    return Settings(thr, args.cycle_time_ms, args.no_straggler, args.bandwidth_scale,
                    args.latency_scale, args.ranks)


def main(argv=None) -> int:
    p = _parser()
    args = p.parse_args(argv)
    settings = _settings(args, p)
    model, err = load_model(args.paths)
    if err:
        print(f"ringscope: {err}", file=sys.stderr)
        return 2
    from viewer.whatif import predict

    res = predict(model, settings)
    tl = res.pop("timeline", None)
    if args.json:
        res["timeline"] = tl.to_dict(orient="records") if tl is not None else []
        print(json.dumps(res, indent=2))
        return 0
    _print(res)
    return 0


def _print(res) -> None:
    from viewer.units import UNITS, duration, pct, rate, size

    ms = UNITS["ms"]

    s, own = res["settings"], res["run_settings"]
    print(f"run:        fusion threshold {size(own['fusion_threshold'])}, cycle "
          f"{ms(own['cycle_time_ms'])}, {own['ranks']} ranks")
    if own["assumed"]:
        print(f"            (not in the trace, the defaults assumed: {', '.join(own['assumed'])})")
    print(f"what if:    fusion threshold {size(s['fusion_threshold'])}, cycle {ms(s['cycle_time_ms'])}"
          f"{', no straggler' if s['no_straggler'] else ''}, bandwidth x{s['bandwidth_scale']:g}, "
          f"latency x{s['latency_scale']:g}, {s['ranks']} ranks")
    measured = res["measured_step_ms"]
    print(f"measured:   {ms(measured)} per step (the run's step time: median over its steps)" if measured is not None
          else "measured:   – (the trace marks no steps; each occurrence of its tensors is replayed as one)")
    print(f"baseline:   {ms(res['baseline_step_ms'])} per step (replayed with the run's settings, median over "
          f"{len(res['steps'])} replayed steps; worst step off by {pct(res['baseline_error_pct'])})")
    change = 100 * (res["predicted_step_ms"] / res["baseline_step_ms"] - 1)
    print(f"predicted:  {ms(res['predicted_step_ms'])} per step ({'+' if change > 0 else ''}{pct(change)} "
          "against the baseline)")
    if res["extrapolated"]:
        print("            (an extrapolation: ring cost model, each rank's compute as measured)")
    print(f"\n{'step':>4}  {'measured':>9}  {'baseline':>9}  {'predicted':>9}")
    for r in res["steps"]:
        print(f"{r['step']:>4}  {ms(r['measured_ms']):>9}  {ms(r['baseline_ms']):>9}  {ms(r['predicted_ms']):>9}")
    print(f"\nresponse cost, memcpy included (dispatch latency {ms(res['dispatch_latency_ms'])}, calibrated on the "
          "run; busy: the share of ranks computing meanwhile):")
    for f in res["fits"]:
        print(f"  {f['backend']:<6} {f['op']:<10} fixed {duration(f['fixed_us'] * 1e3):>9} + "
              f"{duration(f['us_per_mib'] * 1e3):>9} per MiB, x(1 + {f['contention']:g} x busy), "
              f"over {f['n']} collectives, median error {pct(f['median_err_pct'])}, worst {pct(f['worst_err_pct'])}")
    ab = (f"α {duration(res['alpha_us'] * 1e3)}, β {rate(res['beta_gbps'])}" if res["alpha_us"] is not None
          else "no credible allreduce fit")
    print(f"the run's α-β fit (the wire alone, fastest op per size; summarize's headline): {ab}")


if __name__ == "__main__":
    sys.exit(main())

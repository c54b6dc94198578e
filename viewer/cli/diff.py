"""``ringscope diff A B [--json] [--csv DIR] [--fail-if-slower PCT] [--top N]``: what changed between two runs;
``ringscope diff --a A1 A2 A3 --b B1 B2 B3 ...``: between reruns of each, against the spread between them."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# The viewer's modules load inside main, once the arguments parse: --help and a bad argument answer
# without pandas.

EXIT_SLOWER = 1   # --fail-if-slower: B is slower by more than PCT, beyond the noise
USAGE = ("ringscope diff A B [options]\n       ringscope diff --a A1 [A2 ...] --b B1 [B2 ...] [options]")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ringscope diff", usage=USAGE, description=(
        "What changed between two runs: step time against the noise, phases, collectives, ranks, settings. "
        "With several runs a side (reruns of one setting), the change is tested against the spread between them."))
    p.add_argument("runs", nargs="*", metavar="A B",
                   help="the run before and the run after: a run directory or a trace file (ringscope, Kineto, "
                        "Horovod)")
    p.add_argument("--a", nargs="+", metavar="RUN", help="the runs before (reruns of one setting), instead of A")
    p.add_argument("--b", nargs="+", metavar="RUN", help="the runs after, instead of B")
    p.add_argument("--json", action="store_true", help="print the diff as JSON (docs/DIFF.md)")
    p.add_argument("--csv", metavar="DIR", help="also write phases, collectives, movers, ranks and settings as CSV")
    p.add_argument("--fail-if-slower", type=float, metavar="PCT",
                   help=f"exit {EXIT_SLOWER} when B's step is slower than A's by more than PCT %% beyond the noise")
    p.add_argument("--top", type=int, default=5, metavar="N", help="movers shown (default 5)")
    p.add_argument("--no-cache", action="store_true", help="parse again, ignoring the parse cache")
    return p


def sides(p: argparse.ArgumentParser, args) -> tuple[list[str], list[str]]:
    """The runs before and after: two positionals, or ``--a`` and ``--b`` (argparse's error otherwise)."""
    if args.runs:
        if args.a or args.b:
            p.error("give A B, or --a and --b, not both")
        if len(args.runs) != 2:
            p.error(f"expected two runs, A and B, got {len(args.runs)} (several a side: --a A1 A2 ... --b B1 B2 ...)")
        return [args.runs[0]], [args.runs[1]]
    if not args.a or not args.b:
        p.error("expected two runs, A and B, or --a RUN... and --b RUN...")
    return args.a, args.b


def slower_beyond(d: dict, pct: float) -> bool:
    """B slower than A by more than ``pct`` beyond the noise: significant, and the change's 95 % interval
    lies wholly above ``pct``."""
    low = d["change_ci_pct"][0]
    return bool(d["significant"] and low is not None and low > pct)


def write_csv(d: dict, out: Path) -> None:
    """The diff's lists as ``out/<part>.csv``."""
    import pandas as pd

    out.mkdir(parents=True, exist_ok=True)
    parts = {"phases": d["phases"], "collectives": d["collectives"], "movers": d["movers"],
             "settings_changed": d["settings_changed"], "rank_movers": d["ranks"]["movers"]}
    for name, rows in parts.items():
        pd.DataFrame(rows).to_csv(out / f"{name}.csv", index=False)
    head = {k: d[k] for k in ("change_ms", "change_pct", "p_value", "significant", "verdict")}
    pd.DataFrame([{"a_step_ms": d["a"]["step_ms"], "b_step_ms": d["b"]["step_ms"], **head,
                   "change_ci_low_pct": d["change_ci_pct"][0], "change_ci_high_pct": d["change_ci_pct"][1]}]
                 ).to_csv(out / "headline.csv", index=False)


def main(argv=None) -> int:
    """Entry point; 2 on bad input (one line on stderr), 1 when ``--fail-if-slower`` trips, else 0."""
    p = _parser()
    args = p.parse_args(argv)
    a_paths, b_paths = sides(p, args)
    from viewer.errors import TraceError, show_warnings_on_stderr

    show_warnings_on_stderr()
    from viewer.run import Run

    loaded: dict[str, object] = {}
    for path in a_paths + b_paths:
        try:
            if path not in loaded:
                loaded[path] = Run.load(path, cache=not args.no_cache)
        except TraceError as exc:
            print(f"ringscope: {exc}", file=sys.stderr)
            return 2
    from viewer.diff.compare import diff_sides

    d = diff_sides([loaded[x] for x in a_paths], [loaded[x] for x in b_paths], a_paths, b_paths, top=args.top)
    if args.csv:
        try:
            write_csv(d, Path(args.csv))
        except OSError as exc:
            print(f"ringscope: {args.csv}: cannot write CSV ({exc.strerror or exc})", file=sys.stderr)
            return 2
    if args.json:
        print(json.dumps(d, indent=2))
    else:
        from viewer.cli.diff_text import print_diff

        print_diff(d)
    if args.fail_if_slower is not None and slower_beyond(d, args.fail_if_slower):
        print(f"ringscope: B is slower than A by more than {args.fail_if_slower:g} % beyond the noise "
              f"({d['change_pct']:.1f} %, 95 % interval {d['change_ci_pct'][0]:.1f}–{d['change_ci_pct'][1]:.1f} %)",
              file=sys.stderr)
        return EXIT_SLOWER
    return 0


if __name__ == "__main__":
    sys.exit(main())

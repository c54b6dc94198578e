"""``ringscope merge RUN_DIR|FILES -o merged.json [--nsys ...]``: one Chrome trace, one process per rank,
on a common clock. GPU lanes from Nsight exports come from :mod:`viewer.nsys.merge_hook`."""
from __future__ import annotations

import argparse
import sys

from viewer.nsys import merge_hook

# The viewer's modules load inside the functions, once the arguments parse; merging our traces never
# loads pandas (only a Kineto run's tables do).


def _kineto(paths) -> bool:
    """The run holds a torch.profiler (Kineto) trace: merged from its loaded tables."""
    from viewer.io.files import detect_format
    from viewer.loader import find_traces

    files = [f for p in ([paths] if isinstance(paths, str) else paths) for f in find_traces(p)]
    return any(detect_format(f) == "kineto" for f in files)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (the Nsight overlay adds its ``--nsys`` option through its hook)."""
    p = argparse.ArgumentParser(prog="ringscope merge",
                                description="Merge per-rank traces into one aligned Chrome trace.")
    p.add_argument("paths", nargs="+", help="a run directory or per-rank trace files")
    p.add_argument("-o", "--output", required=True, help="merged trace to write (.json)")
    p.add_argument("--ranks", metavar="LIST", help="only these ranks, e.g. 0,17,200-203 (only their traces are read)")
    p.add_argument("--top-late", type=int, metavar="K", help="only the K ranks the straggler analysis puts first, "
                   "and rank 0 to read them against (the most punctual rank when 0 is among them)")
    merge_hook.add_arguments(p)
    return p


def main(argv=None) -> int:
    """Entry point; exit 2 with one line on stderr on bad input."""
    args = build_parser().parse_args(argv)
    from viewer.errors import TraceError, show_warnings_on_stderr
    from viewer.merge import plan_merge, write_merged

    show_warnings_on_stderr()
    from viewer import memory
    memory.use_system_allocator()
    paths = args.paths if len(args.paths) > 1 else args.paths[0]
    problem = _subset_problem(args)
    if problem:
        print(f"ringscope merge: {problem}", file=sys.stderr)
        return 2
    try:
        kineto = _kineto(paths)
        if kineto and (args.ranks is not None or args.top_late is not None):
            print("ringscope merge: --ranks and --top-late take ringscope traces or Horovod timelines, not a "
                  "torch.profiler run", file=sys.stderr)
            return 2
        if kineto:
            from viewer.kineto.merge import write_merged as write_kineto
            from viewer.loader import load_run

            stats = write_kineto(load_run(paths, use_cache=False), args.output)
            print(f"wrote {args.output}: {stats['ranks']} rank(s), {stats['events']} events")
            return 0
        ranks, picked = _ranks(args, paths)
        plan = plan_merge(paths, ranks)
        extra = None
        if getattr(args, "nsys", None):
            extra = merge_hook.gpu_extra_events(paths, args.nsys, plan)
            if ranks is not None:   # the GPU lanes of the ranks merged (their pid is the rank)
                extra = [e for e in extra if e.get("pid") in ranks]
        stats = write_merged(plan, args.output, extra_events=extra)
    except TraceError as exc:  # the Nsight overlay's NsysError is one too
        print(f"ringscope: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"ringscope: {getattr(exc, 'filename', None) or args.output}: {exc.strerror or exc}",
              file=sys.stderr)
        return 2
    lanes = f", {stats['overlap_lanes']} overlap lane(s)" if stats["overlap_lanes"] else ""
    print(f"wrote {args.output}: {stats['ranks']} rank(s){picked}, {stats['events']} events{lanes}")
    return 0


def _subset_problem(args) -> str | None:
    """What is wrong with ``--ranks`` / ``--top-late`` (one phrase), or None."""
    if args.top_late is not None and args.top_late < 1:
        return f"--top-late {args.top_late}: K must be 1 or more"
    if args.top_late is not None and len(args.paths) > 1:
        return "--top-late takes one run directory (its store holds the lateness)"
    if args.ranks is not None:
        from viewer.merge_subset import parse_ranks

        try:
            parse_ranks(args.ranks)
        except ValueError as exc:
            return f"--ranks {args.ranks!r}: {exc}"
    return None


def _ranks(args, paths) -> tuple[set[int] | None, str]:
    """The ranks to merge (None: all) and what the output line says of how they were picked."""
    from viewer.merge_subset import parse_ranks, top_late

    if args.ranks is None and args.top_late is None:
        return None, ""
    ranks = parse_ranks(args.ranks) if args.ranks is not None else set()
    if args.top_late is None:
        return ranks, ""
    late, reference = top_late(paths, args.top_late)
    return ranks | {*late, reference}, f" (late: {', '.join(map(str, late))}; reference: {reference})"


if __name__ == "__main__":
    sys.exit(main())

"""``ringscope query RUN "SELECT ..." [--csv | --json] [--cache-dir DIR]``: SQL over a run's tables (docs/QUERY.md)."""
from __future__ import annotations

import argparse
import sys

# DuckDB and the viewer load inside main, once the arguments parse.


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ringscope query", description=(
        "Run SQL (DuckDB) over a run's tables: events, tensor_ops, fused_ops, readiness, cycles, ranks "
        "(docs/QUERY.md). The run's store is built first when absent."))
    p.add_argument("run", help="a run directory or one trace file")
    p.add_argument("sql", help='the query, e.g. "SELECT rank, count(*) FROM events GROUP BY rank"')
    out = p.add_mutually_exclusive_group()
    out.add_argument("--csv", action="store_true", help="print the rows as CSV (a header line first)")
    out.add_argument("--json", action="store_true", help="print the rows as a JSON array of objects")
    p.add_argument("--cache-dir", metavar="DIR", help="where the run's store lives")
    return p


def main(argv=None) -> int:
    """Entry point; returns the exit code (2 on a bad run or bad SQL, with one line on stderr)."""
    args = _parser().parse_args(argv)
    import duckdb

    from viewer import query
    from viewer.errors import TraceError, show_warnings_on_stderr

    show_warnings_on_stderr()
    try:
        con = query.connect(query.store_of(args.run, args.cache_dir))
    except TraceError as exc:
        print(f"ringscope: {exc}", file=sys.stderr)
        return 2
    try:
        cur = con.execute(args.sql)
        names = [d[0] for d in cur.description or []]
        rows = cur.fetchall()
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"ringscope: query: {first}", file=sys.stderr)
        return 2
    _print(names, rows, "csv" if args.csv else "json" if args.json else "text")
    return 0


def _print(names: list[str], rows: list[tuple], form: str) -> None:
    if form == "csv":
        import csv

        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(names)
        w.writerows(rows)
    elif form == "json":
        import json

        print(json.dumps([dict(zip(names, r)) for r in rows], indent=1, default=str))
    else:
        cells = [names] + [["NULL" if v is None else str(v) for v in r] for r in rows]
        widths = [max(len(c[i]) for c in cells) for i in range(len(names))]
        for k, row in enumerate(cells):
            print("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())
            if k == 0:
                print("  ".join("-" * w for w in widths))
        print(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")


if __name__ == "__main__":
    sys.exit(main())

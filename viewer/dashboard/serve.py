"""``ringscope view RUN_DIR [RUN_DIR2] [--port] [--host] [--root DIR] [--nsys [RANK=]FILE.sqlite]``."""
from __future__ import annotations

import argparse
import contextlib
import signal
import socket
import sys
from pathlib import Path

# dash and pandas load once the arguments parse: --help and a bad argument answer without them


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ringscope view", description="Start the dashboard for one or two runs.")
    p.add_argument("runs", nargs="*", metavar="RUN_DIR", help="run directories or trace files (second: compare)")
    p.add_argument("--port", type=int, default=8050)
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--root", help="trace root the in-app picker may open from (default: the first run's parent)")
    p.add_argument("--max-upload-mb", type=float, default=64.0, help="largest trace the upload accepts")
    p.add_argument("--max-expanded-mb", type=float,
                   help="largest size a gzip upload may expand to (default: 4x --max-upload-mb)")
    p.add_argument("--max-runs", type=int, default=8,
                   help="runs opened or uploaded while serving that stay loaded (oldest use goes first)")
    p.add_argument("--max-memory-mb", type=float, default=2048.0,
                   help="table memory those runs may hold together before the oldest is unloaded")
    p.add_argument("--nsys", action="append", default=[], metavar="[RANK=]FILE.sqlite",
                   help="Nsight Systems SQLite export(s) to overlay on the first run as GPU lanes")
    return p


def check_port(host: str, port: int) -> None:
    """Raise OSError (one line) when ``host:port`` cannot be bound, before any run is loaded."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            raise OSError(exc.strerror or str(exc)) from None


def serve(runs=(), host: str = "127.0.0.1", port: int = 8050, root=None, max_upload_mb: float = 64.0,
          tables=None, label: str = "run", nsys=(), **limits) -> None:
    """Start the dashboard and block until interrupted; ``limits``: see ``app.make_app``."""
    from viewer.dashboard.app import make_app

    check_port(host, port)
    app = make_app(runs, root, max_upload_mb, tables, label, nsys, **limits)
    # SIGTERM ends the process through SystemExit, so atexit removes the uploads' folder
    with contextlib.suppress(ValueError):   # not the main thread: atexit still covers a normal exit
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"ringscope dashboard on http://{host}:{port}/  (Ctrl+C to stop)", flush=True)
    if host not in ("127.0.0.1", "localhost", "::1"):
        print(f"ringscope view: listening on {host}: anyone who can reach this port can read these traces",
              file=sys.stderr, flush=True)
    app.run(host=host, port=port, debug=False)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    from viewer import memory
    from viewer.dashboard.registry import LoadError

    memory.use_system_allocator()

    if args.root and not Path(args.root).is_dir():
        print(f"ringscope view: {args.root}: --root is not a directory", file=sys.stderr)
        return 2
    if not args.runs and not args.root:
        print("ringscope view: give a RUN_DIR or a --root to pick runs from", file=sys.stderr)
        return 2
    try:
        if args.nsys and not args.runs:
            print("ringscope view: --nsys needs a RUN_DIR to overlay on", file=sys.stderr)
            return 2
        for opt in ("max_upload_mb", "max_expanded_mb", "max_runs", "max_memory_mb"):
            if getattr(args, opt) is not None and getattr(args, opt) <= 0:
                print(f"ringscope view: --{opt.replace('_', '-')} must be > 0", file=sys.stderr)
                return 2
        serve(args.runs, args.host, args.port, args.root, args.max_upload_mb, nsys=args.nsys,
              max_expanded_mb=args.max_expanded_mb, max_runs=args.max_runs, max_memory_mb=args.max_memory_mb)
    except LoadError as exc:
        print(f"ringscope view: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # e.g. the port is taken
        print(f"ringscope view: cannot serve on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

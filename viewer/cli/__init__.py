"""The ``ringscope`` command: a dispatcher to each subcommand's module, imported only when it runs (``ringscope
--help`` stays light); ``run`` and ``cluster`` run in a fresh interpreter, so the viewer never imports the runtime."""
from __future__ import annotations

import importlib
import os
import subprocess
import sys

# subcommand -> (kind, target, one-line help). kind "viewer": import target and call main(argv);
# kind "module": run ``python -m target argv``.
COMMANDS = {
    "demo": ("viewer", "viewer.cli.demo", "4-rank training demo: traces, summary, dashboard"),
    "run": ("module", "collectives.launcher", "run a script on N ranks through mpiexec"),
    "cluster": ("module", "collectives.cluster", "rehearsal cluster of namespaced hosts: up, hosts, down"),
    "summarize": ("viewer", "viewer.cli.summarize", "summarize a run: findings, stragglers, fusion, bandwidth"),
    "merge": ("viewer", "viewer.cli.merge", "merge per-rank traces into one aligned Chrome trace"),
    "query": ("viewer", "viewer.cli.query", "SQL over a run's tables (DuckDB over its store)"),
    "whatif": ("viewer", "viewer.cli.whatif", "predict a run's step time under other settings"),
    "tune": ("viewer", "viewer.cli.tune", "search fusion threshold x cycle time on the what-if model"),
    "view": ("viewer", "viewer.dashboard.serve", "start the dashboard for one or more runs"),
    "bench": ("module", "bench", "run the benchmarks side by side"),
}


def _usage() -> str:
    lines = ["usage: ringscope COMMAND [ARGS]", "", "commands:"]
    lines += [f"  {name:<10} {help_}" for name, (_, _, help_) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``ringscope`` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    cmd, rest = argv[0], argv[1:]
    if cmd not in COMMANDS:
        print(f"ringscope: unknown command {cmd!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    kind, target, _ = COMMANDS[cmd]
    if kind == "module":
        # bench/ lives in the source checkout, not in the installed packages: run from there
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        cwd = root if target == "bench" else None
        if cwd and not os.path.isdir(os.path.join(root, "bench")):
            print(f"ringscope: {root}/bench: not found (benchmarks run from a source checkout)",
                  file=sys.stderr)
            return 2
        return subprocess.call([sys.executable, "-m", target, *rest], cwd=cwd)
    return int(importlib.import_module(target).main(rest) or 0)

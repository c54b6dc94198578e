"""The ``ringscope`` command: a dispatcher to each subcommand's module, imported only when it runs (``ringscope
--help`` stays light); ``run`` and ``cluster`` run in a fresh interpreter, so the viewer never imports the runtime.

``pip install ringscope`` brings what the analyst's commands need; the trainer's commands need extras (``NEEDS``).
A missing extra, a compiled module that was not built, or a folder named like one of ringscope's packages that
shadows it each end the command with one line that says the fix."""
from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

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
    "diff": ("viewer", "viewer.cli.diff", "what changed between two runs or reruns: step, phases, collectives, ranks"),
    "view": ("viewer", "viewer.dashboard.serve", "start the dashboard for one or more runs"),
    "bench": ("module", "bench", "run the benchmarks side by side"),
}


# command -> the extras it needs, each with the module that tells it is installed (the analyst's commands: none)
NEEDS = {"demo": {"runtime": "mpi4py", "torch": "torch"}, "run": {"runtime": "mpi4py"},
         "cluster": {"runtime": "mpi4py"}}
EXTRA_OF = {"mpi4py": "runtime", "torch": "torch", "nvtx": "nvtx", "pynvml": "gpu",   # module -> its extra
            "distributed": "cluster", "dask": "cluster"}
PACKAGES = ("collectives", "tracer", "viewer")   # ringscope's top-level names: generic, so checked (_stray)
# the commands that print or write their answer and hold nothing open: as the process's command, they end
# once their output is flushed, without the interpreter's teardown (freeing pandas', Arrow's and the run's
# objects one by one: ~0.13 CPU s of a 38 MB Kineto summary's 1.3)
ENDS_AT_ONCE = {"summarize", "merge", "whatif", "tune"}
HOME = Path(__file__).resolve().parents[2]   # the folder holding this viewer/, and so tracer/ and collectives/


def _usage() -> str:
    lines = ["usage: ringscope COMMAND [ARGS]    (ringscope --version)", "", "commands:"]
    lines += [f"  {name:<10} {help_}" for name, (_, _, help_) in COMMANDS.items()]
    return "\n".join(lines)


def _version() -> str:
    from tracer import __version__
    return __version__


def _missing_extra(cmd: str) -> str | None:
    """One line when ``cmd`` needs an extra that is not installed (found without importing it)."""
    needs = NEEDS.get(cmd, {})
    if "runtime" in needs and not sys.platform.startswith("linux"):
        return f"ringscope {cmd}: the runtime runs on Linux only (this is {sys.platform}); the analyst's commands " \
               "(summarize, merge, whatif, tune, view) work here"
    missing = [extra for extra, module in needs.items() if importlib.util.find_spec(module) is None]
    return f"ringscope {cmd}: needs ringscope's {'/'.join(missing)} extra: pip install " \
           f"'ringscope[{','.join(missing)}]'" if missing else None


def _stray(folders: list[Path]) -> str | None:
    """One line when one of ringscope's package names resolves to a folder other than ringscope's own (a user's
    ``tracer/`` first on the path): the command would import the wrong code. ``folders`` are searched first, as
    the interpreter of a ``python -m`` child would (its working directory)."""
    for name in PACKAGES:
        found = next((f / name for f in folders if (f / name / "__init__.py").is_file()), None)
        if found is None:
            spec = importlib.util.find_spec(name)
            found = Path(spec.origin).parent if spec and spec.origin else None
        if found is not None and found.resolve() != HOME / name:
            return f"ringscope: {found} is not ringscope's {name!r} package ({HOME / name}) but shadows it: rename " \
                   "that folder, or run from another directory"
    return None


def _overwritten() -> str | None:
    """One line when another distribution's files were written over one of ringscope's package folders (pip
    installs a distribution ``tracer`` into the same ``tracer/``): an ``__init__.py`` that differs from the one
    ringscope's install recorded. An editable install records none: nothing to check."""
    import base64
    import hashlib
    import importlib.metadata

    try:
        dist = importlib.metadata.distribution("ringscope")
    except importlib.metadata.PackageNotFoundError:
        return None
    for line in (dist.read_text("RECORD") or "").splitlines():
        path, _, digest = line.partition(",")
        if path not in [f"{name}/__init__.py" for name in PACKAGES]:
            continue
        data = Path(str(dist.locate_file(path))).read_bytes()
        if digest.partition(",")[0] != "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(
                b"=").decode():
            name = path.partition("/")[0]
            others = [d for d in importlib.metadata.packages_distributions().get(name, []) if d.lower() != "ringscope"]
            culprit = f"pip uninstall {others[0]} && " if others else ""
            return f"ringscope: another distribution{f' ({others[0]!r})' if others else ''} wrote its files over " \
                   f"ringscope's {name!r} package: {culprit}pip install --force-reinstall ringscope"
    return None


def _import_error_line(cmd: str, e: ImportError) -> str | None:
    """The one line for an import that failed while ``cmd`` ran, or None when it is not one we can explain."""
    from tracer.native import NativeModuleMissing

    if isinstance(e, NativeModuleMissing):
        return str(e)
    top = (e.name or "").partition(".")[0]
    if top in EXTRA_OF:
        return f"ringscope {cmd}: needs {top}: pip install 'ringscope[{EXTRA_OF[top]}]'"
    if isinstance(e, ModuleNotFoundError) and top and top not in PACKAGES:
        return f"ringscope {cmd}: the module {top!r} is missing (a dependency of ringscope): pip install " \
               "--force-reinstall ringscope"
    return None


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``ringscope`` console script (``argv`` None: the process's own arguments, and a
    command of :data:`ENDS_AT_ONCE` ends the process)."""
    own = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    cmd, rest = argv[0], argv[1:]
    if cmd not in COMMANDS and cmd != "--version":
        print(f"ringscope: unknown command {cmd!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    kind, target, _ = COMMANDS.get(cmd, ("version", "", ""))
    problem = _stray([Path.cwd()] if kind == "module" else []) or _overwritten() or _missing_extra(cmd)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    if kind == "version":
        print(f"ringscope {_version()}")
        return 0
    if kind == "module":
        # bench/ lives in the source checkout, not in the installed packages: run from there
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        cwd = root if target == "bench" else None
        if cwd and not os.path.isdir(os.path.join(root, "bench")):
            print(f"ringscope: {root}/bench: not found (benchmarks run from a source checkout)",
                  file=sys.stderr)
            return 2
        return subprocess.call([sys.executable, "-m", target, *rest], cwd=cwd)
    try:
        code = int(importlib.import_module(target).main(rest) or 0)
    except BrokenPipeError:   # the reader went away (``| head``): stop quietly, as a killed pipe would
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # the exit's flush must not raise
        return 141
    except ImportError as e:
        line = _import_error_line(cmd, e)
        if line is None:
            raise
        print(line, file=sys.stderr)
        return 2
    if own and cmd in ENDS_AT_ONCE:
        _end(code)
    return code


def _end(code: int) -> None:
    """Flush the output and end the process with ``code``; if the flush fails (a closed pipe), return and
    let the interpreter's exit report it as before."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        return
    os._exit(code)

"""What the numbers were measured on: cores, CPU model, memory, load, Python and library versions."""
from __future__ import annotations

import os
import platform
import sys
from importlib import metadata

PACKAGES = ("numpy", "mpi4py", "mpich", "torch", "pandas", "pyarrow", "orjson", "dash",
            "playwright")


def _cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_gib() -> float | None:
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def describe() -> dict:
    """A JSON-able description of this machine and software stack."""
    versions = {}
    for p in PACKAGES:
        try:
            versions[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            versions[p] = None
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return {"cpu_model": _cpu_model(), "cores": os.cpu_count(), "usable_cores": usable,
            "mem_gib": _mem_gib(), "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
            "python": sys.version.split()[0], "platform": platform.platform(),
            "versions": versions}


def one_line(m: dict) -> str:
    v = m["versions"]
    return (f"{m['cpu_model']}, {m['usable_cores']} cores, {m['mem_gib']} GiB, "
            f"load {m['loadavg_at_start'][0]}; Python {m['python']}, MPICH {v.get('mpich')}, "
            f"mpi4py {v.get('mpi4py')}, torch {v.get('torch')}, numpy {v.get('numpy')}")

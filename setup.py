"""Build hooks for the required C extensions: the tracer's recorder (``tracer._record``), the fusion
plan (``tracer._fusion_rules``), the engine's native core (``collectives._core``, which calls the
recorder's and the fusion plan's C APIs, tracer/record_api.h and tracer/fusion_api.h),
the bit round's MPI calls (``collectives._round``, against the mpich wheel's mpi.h and libmpi) and
the viewer's event scanner (``viewer.io._eventscan``); everything else is in pyproject.toml."""
import importlib.metadata
import os
import sys
from glob import glob

from setuptools import Extension, setup


def mpich_dirs() -> tuple[str, str]:
    """The include and library directories of the mpich wheel (a build requirement)."""
    files = {f.name: os.path.dirname(str(f.locate())) for f in importlib.metadata.files("mpich") or ()
             if f.name in ("mpi.h", "libmpi.so")}
    if len(files) != 2:
        raise RuntimeError("the mpich wheel's mpi.h and libmpi.so were not found (pip install mpich)")
    return os.path.normpath(files["mpi.h"]), os.path.normpath(files["libmpi.so"])


ROUND = "collectives/core/round_mpi.c"
# the runtime's core (collectives.*) waits on futexes: Linux only; macOS wheels are the viewer's
RUNTIME = sys.platform.startswith("linux")
mpi_include, mpi_lib = mpich_dirs() if RUNTIME else ("", "")
core_headers = sorted(glob("collectives/core/*.h") + glob("tracer/*.h"))
setup(ext_modules=[e for e in [Extension("tracer._record", ["tracer/_record.c"], depends=["tracer/record_api.h"],
                             extra_compile_args=["-O2"]),
                   Extension("tracer._fusion_rules", ["tracer/_fusion_rules.c"], depends=["tracer/fusion_api.h"],
                             extra_compile_args=["-O2", "-std=gnu11"]),
                   Extension("collectives._core", sorted(set(glob("collectives/core/*.c")) - {ROUND}),
                             include_dirs=["tracer", "collectives/core"], depends=core_headers,
                             extra_compile_args=["-O2", "-std=gnu11"]),
                   # libmpi is not found by the loader on its own: the engine imports this module
                   # once mpi4py has loaded the library, which it then shares
                   Extension("collectives._round", [ROUND], include_dirs=["collectives/core", mpi_include],
                             library_dirs=[mpi_lib], libraries=["mpi"], depends=core_headers,
                             extra_compile_args=["-O2", "-std=gnu11"]),
                   Extension("viewer.io._eventscan", ["viewer/io/_eventscan.c"], extra_compile_args=["-O2"])]
                   if RUNTIME or not e.name.startswith("collectives.")])

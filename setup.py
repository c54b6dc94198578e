"""Build hooks for the required C extensions: the tracer's recorder (``tracer._record``), the
engine's native core (``collectives._core``, which calls the recorder's C API, tracer/record_api.h)
and the viewer's event scanner (``viewer.io._eventscan``); everything else is in pyproject.toml."""
from glob import glob

from setuptools import Extension, setup

setup(ext_modules=[Extension("tracer._record", sorted(glob("tracer/*.c")),
                             depends=sorted(glob("tracer/*.h")), extra_compile_args=["-O2"]),
                   Extension("collectives._core", sorted(glob("collectives/core/*.c")),
                             include_dirs=["tracer", "collectives/core"],
                             depends=sorted(glob("collectives/core/*.h") + glob("tracer/*.h")),
                             extra_compile_args=["-O2", "-std=gnu11"]),
                   Extension("viewer.io._eventscan", ["viewer/io/_eventscan.c"], extra_compile_args=["-O2"])])

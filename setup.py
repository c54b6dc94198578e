"""Build hooks for the required C extensions: the tracer's recorder (``tracer._record``) and the
viewer's event scanner (``viewer.io._eventscan``); everything else is in pyproject.toml."""
from glob import glob

from setuptools import Extension, setup

setup(ext_modules=[Extension("tracer._record", sorted(glob("tracer/*.c")),
                             depends=sorted(glob("tracer/*.h")), extra_compile_args=["-O2"]),
                   Extension("viewer.io._eventscan", ["viewer/io/_eventscan.c"], extra_compile_args=["-O2"])])

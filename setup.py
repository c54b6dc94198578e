"""Build hook for the tracer's required C extension (``tracer._record``); everything else is in
pyproject.toml."""
from glob import glob

from setuptools import Extension, setup

setup(ext_modules=[Extension("tracer._record", sorted(glob("tracer/*.c")),
                             depends=sorted(glob("tracer/*.h")), extra_compile_args=["-O2"])])

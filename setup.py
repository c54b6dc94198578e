"""Build hook for the one optional C extension (``tracer._oplines``); everything else is in
pyproject.toml. Without a C compiler the build goes on and the tracer uses its pure-Python twin."""
from setuptools import Extension, setup

SOURCES = ["tracer/_oplines.c", "tracer/_spans.c", "tracer/_stamp.c", "tracer/_lines.c",
           "tracer/_texts.c", "tracer/_note.c"]
setup(ext_modules=[Extension("tracer._oplines", SOURCES, optional=True,
                             depends=["tracer/_buf.h", "tracer/_texts.h"],
                             extra_compile_args=["-O2"])])

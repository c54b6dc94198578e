"""Loading ringscope's compiled modules: when one is missing, one line saying why and the fix.

The usual cause is a source checkout that shadows the installed ringscope: running from the checkout's
root puts its ``tracer/`` (say) first on ``sys.path``, and the checkout holds the C source, not the
built module."""
from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType


class NativeModuleMissing(ImportError):
    """A compiled module of ringscope is missing; ``str(e)`` is one line with the fix."""


def load(name: str) -> ModuleType:
    """Import the compiled module ``name`` (e.g. ``"tracer._record"``); raise :class:`NativeModuleMissing`
    when it was never built where its package was found."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name != name:
            raise
        raise NativeModuleMissing(missing_message(name)) from None


def missing_message(name: str) -> str:
    """The one line for a compiled module ``name`` that its package's folder lacks."""
    top = sys.modules[name.split(".")[0]]   # imported already: name's package is being imported
    root = os.path.dirname(os.path.dirname(os.path.abspath(top.__file__ or "")))
    folder = os.path.join(root, *name.split(".")[:-1])
    if os.path.exists(os.path.join(root, "setup.py")):
        return (f"ringscope: {name} (a C extension) is not built in the source checkout {root}, which shadows "
                f"any installed ringscope: run `pip install -e {root}`, or run from another directory")
    return f"ringscope: {name} (a C extension) is missing from {folder}: reinstall ringscope (pip install " \
           f"--force-reinstall ringscope)"

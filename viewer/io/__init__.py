"""What every trace reader shares: JSON trace files, the C event scanner (``_eventscan``), column helpers."""
from tracer.native import load

# the readers' ``from viewer.io import _eventscan`` gets this: one line with the fix when it was not built
_eventscan = load("viewer.io._eventscan")

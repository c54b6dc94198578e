"""Our own traces (docs/TRACE_FORMAT.md): :mod:`reader` (one trace into columns), :mod:`tables` and
:mod:`events` (one rank's tables), :mod:`phases` (each op's negotiation and QUEUE, rebuilt) and
:mod:`elastic` (an elastic run's generations, docs/ELASTIC.md)."""

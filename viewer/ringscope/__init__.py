"""Our own traces (docs/TRACE_FORMAT.md): :mod:`reader` (one trace into Arrow columns, damage
recorded), :mod:`tables` (one rank's schema tables from those columns), :mod:`phases` (each tensor's
negotiation and QUEUE phases rebuilt from the response it ran in) and :mod:`elastic` (an elastic run's
generations of traces, docs/ELASTIC.md)."""

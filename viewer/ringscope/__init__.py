"""Our own traces (docs/TRACE_FORMAT.md): read into columns, one rank's tables, an elastic run's generations."""

"""Nsight Systems overlay: GPU kernels from ``nsys export --type sqlite`` under each rank's phases.

Pipeline (each step a small module, pure functions on DataFrames where possible)::

    reader.read_report(path)            -> NsysReport (NVTX ranges, kernels + launching thread, session start)
    mapping.map_processes(reports, ...) -> which nsys process is which rank
    align.align_process(...)            -> clock offset nsys -> run time axis (session start, then NVTX refine)
    overlay.gpu_event_rows(...)         -> events-table rows on threads "gpu:<stream>"
    overlay.chrome_events(...)          -> extra Chrome-trace events for the merged trace
    attach.attach_nsys(tables, specs)   -> all of the above; attach.with_gpu_rows(tables, overlay)
    merge_hook                          -> ``ringscope merge RUN --nsys REPORT.sqlite | RANK=FILE ...``
    fixture.build(traces, out)          -> SYNTHETIC exports from a real run's traces (tests, demos)

Only the standard library's sqlite3 and pandas are used; nothing here imports the runtime.
"""

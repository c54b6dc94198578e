"""Readers, one module per input: Chrome-trace JSON files (:mod:`chrome_json`), ringscope traces
(:mod:`ringscope`, into Arrow columns: :mod:`columns`) and Horovod timelines (:mod:`horovod`).
Kineto traces are read by :mod:`viewer.kineto`, Nsight SQLite exports by :mod:`viewer.nsys.reader`."""

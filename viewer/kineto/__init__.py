"""Kineto (torch.profiler) traces: reading, aligning, merging and analysing them (docs/KINETO.md).

Reading one trace, then a run::

    reader.KinetoReader(path)        -> header, and the events as the C scanner's columns
    events.Events(...)               -> complete events as numpy columns (+ the few kept whole)
    comms.collectives(...)           -> what each collective ran, on how many bytes, in which group
    tables.parse_file(path)          -> one rank's schema tables (local ns)
    attach.attach(parsed)            -> a Kineto trace beside our own trace of its rank joins it
    clock.apply(parsed)              -> clock offsets between ranks, from the collectives they share
    merge.write_merged(tables, out)  -> ``ringscope merge`` of a run with Kineto traces

Analyses (pure functions of a run's tables, HTA's conventions): :mod:`kernels` (which GPU work counts),
:mod:`temporal`, :mod:`overlap`, :mod:`collectives`, :mod:`steps`, :mod:`streams`, :mod:`stragglers`;
:mod:`summary` gathers them for ``ringscope summarize``.
"""

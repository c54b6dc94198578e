"""Kineto (torch.profiler) traces: reading, aligning, merging and analysing them (docs/KINETO.md).

:func:`tables.parse_file` reads one rank (:mod:`events`, :mod:`comms`); :mod:`attach` and
:mod:`clock` put ranks on one axis; :mod:`catalog` declares the analyses (HTA's conventions).
"""

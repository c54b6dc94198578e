"""Put Nsight Systems GPU lanes (``gpu:<stream>`` rows) into a loaded run before it is shown."""
from __future__ import annotations

from viewer import Run
from viewer.dashboard.registry import LoadError
from viewer.nsys.attach import attach_nsys, with_gpu_rows
from viewer.nsys.errors import NsysError


def attach(held, specs) -> None:
    """Overlay the nsys exports ``specs`` (``FILE`` or ``RANK=FILE``) on ``held``'s run.

    Call before anything is computed (``held.warm()``): the run is replaced by one over the overlaid
    tables; the mapping and alignment lines join the run's notes, shown in the banner.
    """
    try:
        ov = attach_nsys(held.run.tables, list(specs))
    except NsysError as exc:
        raise LoadError(" ".join(str(exc).split())) from None
    held.run = Run(with_gpu_rows(held.run.tables, ov), source=held.run.source)
    held.notes += list(ov.warnings) + [f"Nsight overlay: {line}" for line in ov.report_lines()]

"""Put Nsight Systems GPU lanes (``gpu:<stream>`` rows) into a loaded run before it is shown."""
from __future__ import annotations

from viewer.dashboard.registry import LoadError
from viewer.nsys.attach import attach_nsys, with_gpu_rows
from viewer.nsys.errors import NsysError


def attach(view, specs) -> None:
    """Overlay the nsys exports ``specs`` (``FILE`` or ``RANK=FILE``) on ``view``'s tables in place.

    Call before anything derived is computed (``view.warm()``); the mapping and alignment lines
    join the run's notes, shown in the banner.
    """
    try:
        ov = attach_nsys(view.tables, list(specs))
    except NsysError as exc:
        raise LoadError(" ".join(str(exc).split())) from None
    view.tables = with_gpu_rows(view.tables, ov)
    view._run = None  # the façade is rebuilt over the overlaid tables
    view.notes += list(ov.warnings) + [f"Nsight overlay: {line}" for line in ov.report_lines()]

"""The exceptions a Horovod script imports from ``horovod.common.exceptions``, under
``collectives.exceptions`` (also ``hvd.elastic.*``)."""
from __future__ import annotations

from collectives.handles import CollectiveError

# a collective failed on this rank (Horovod's name for it); the same class as CollectiveError, so
# ``except HorovodInternalError`` catches every failed collective
HorovodInternalError = CollectiveError


class HostsUpdatedInterrupt(RuntimeError):
    """Raised by ``State.commit()``/``check_host_updates()`` on every rank when the driver found
    new hosts: the ``elastic.run`` wrapper ends this generation so that the next one includes them.
    ``skip_sync`` is Horovod's flag (the state need not be re-synchronized); kept for scripts that
    read it."""

    def __init__(self, skip_sync: bool = False):
        super().__init__("the hosts of the elastic job changed")
        self.skip_sync = skip_sync


__all__ = ["HorovodInternalError", "HostsUpdatedInterrupt"]

"""Elastic jobs, as Horovod's ``hvd.elastic``: ``run``, ``State``, ``ObjectState`` and the
exceptions (``TorchState`` and ``ElasticSampler`` are in ``collectives.torch.elastic``).

Launch with ``ringscope run --elastic -np N --min-np A --max-np B script.py``; the mechanism (a
driver that relaunches the MPI world from the last commit) is in docs/ELASTIC.md.
"""
from collectives.elastic.run import run
from collectives.elastic.state import ObjectState, State
from collectives.exceptions import HorovodInternalError, HostsUpdatedInterrupt

__all__ = ["run", "State", "ObjectState", "HorovodInternalError", "HostsUpdatedInterrupt"]

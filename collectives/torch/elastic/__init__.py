"""``hvd.elastic`` for torch: Horovod's ``horovod.torch.elastic`` names on ringscope's driver."""
from collectives.elastic import HorovodInternalError, HostsUpdatedInterrupt, ObjectState, State, run
from collectives.torch.elastic.sampler import ElasticSampler
from collectives.torch.elastic.state import TorchState

__all__ = ["run", "State", "ObjectState", "TorchState", "ElasticSampler",
           "HorovodInternalError", "HostsUpdatedInterrupt"]

"""``ElasticSampler``: a torch sampler that splits what is left of an epoch over the current
world, and picks up where the last commit left off after a reset.

Every rank shuffles the epoch's indices the same way (seed + epoch), so the samples processed so
far are a prefix of that order: the state is ``{epoch, processed_num}``. Rank 0 holds the same
count as every rank (the steps are synchronous), which is why its commit is the job's.
"""
from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sized

import torch.utils.data

from collectives import runtime


class ElasticSampler(torch.utils.data.Sampler):
    """Partition a dataset over the ranks; repartition the unprocessed rest after a reset.

    Call ``record_batch(batch_idx, batch_size)`` after each batch and ``set_epoch(epoch + 1)``
    at the end of each epoch; keep the sampler in a ``TorchState``. ``num_replicas``/``rank``
    default to ``hvd.size()``/``hvd.rank()`` (read again at every reset)."""

    def __init__(self, dataset: Sized, shuffle: bool = True, seed: int = 0,
                 num_replicas: int | None = None, rank: int | None = None):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self._fixed = (num_replicas, rank)
        self.epoch = 0
        self.processed_num = 0
        self.num_replicas = 1
        self.rank = 0
        self.remaining_indices: list[int] = []
        self.num_samples = 0
        self.total_size = 0
        self.reset()

    def set_epoch(self, epoch: int) -> None:
        """Start ``epoch`` (call it at the end of the previous one): nothing of it is processed."""
        self.epoch = epoch
        self.processed_num = 0
        self.reset()

    def record_batch(self, batch_idx: int, batch_size: int) -> None:
        """Count one batch of ``batch_size`` samples per rank as processed."""
        self.processed_num += batch_size * self.num_replicas

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "processed_num": self.processed_num}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch = int(state["epoch"])
        self.processed_num = int(state["processed_num"])
        self.reset()

    def reset(self) -> None:
        """Read the world size and rank again and split the unprocessed indices over it."""
        n, r = self._fixed
        up = runtime.is_initialized()
        self.num_replicas = n if n is not None else (runtime.size() if up else 1)
        self.rank = r if r is not None else (runtime.rank() if up else 0)
        order = list(range(len(self.dataset)))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(order)
        self.remaining_indices = order[self.processed_num:]
        self.num_samples = math.ceil(len(self.remaining_indices) / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self) -> Iterator[int]:
        indices = list(self.remaining_indices)
        indices += indices[:self.total_size - len(indices)]   # pad to a multiple of the world
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

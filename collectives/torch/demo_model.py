"""The demo's models: small on compute, shaped so that fusion and negotiation matter.

Each scenario gets its own parameter mix (counts and sizes are what the timeline shows):
- ``mixed`` (healthy, straggler, hang): ~130 gradient tensors, from a few hundred bytes to 4 MiB
- ``tiny``: ~400 small gradient tensors (at most 16 KiB each)
- ``large``: a handful of 4-16 MiB gradients (bandwidth-bound)
"""
from __future__ import annotations

import time

import torch
from torch import nn


class Block(nn.Module):
    """A pre-norm residual block, LayerNorm + Linear (4 gradient tensors), scaled down so that a
    deep stack stays trainable with plain SGD."""

    def __init__(self, width: int):
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.norm = nn.LayerNorm(width)

    def forward(self, x):
        return x + 0.1 * self.fc(torch.relu(self.norm(x)))


class DemoNet(nn.Module):
    """``stem`` (wide layers) -> ``blocks`` (narrow residual blocks) -> ``head``."""

    def __init__(self, in_dim: int, stem: list[int], width: int, blocks: int, classes: int = 10):
        super().__init__()
        dims = [in_dim, *stem]
        self.stem = nn.Sequential(*[m for a, b in zip(dims, dims[1:])
                                    for m in (nn.Linear(a, b), nn.ReLU())])
        self.proj = nn.Linear(dims[-1], width)
        self.blocks = nn.Sequential(*[Block(width) for _ in range(blocks)])
        self.out_norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, classes)
        self.in_dim = in_dim

    def forward(self, x):
        return self.head(self.out_norm(self.blocks(self.proj(self.stem(x)))))


SHAPES = {
    # in_dim, stem widths, block width, blocks
    "mixed": (256, [1024, 1024, 1024], 128, 30),  # 1 MiB + 2 x 4 MiB stem, 130 grads
    "tiny": (64, [], 32, 100),                # 404 grads, each <= 4 KiB
    "large": (512, [2048, 2048], 256, 2),     # 4 MiB + 16 MiB + 2 MiB + small
}


def build(kind: str, seed: int = 0) -> DemoNet:
    """The model for ``kind`` (mixed, tiny or large), initialised from ``seed``."""
    if kind not in SHAPES:
        raise ValueError(f"unknown demo model {kind!r}; use one of {', '.join(SHAPES)}")
    torch.manual_seed(seed)
    in_dim, stem, width, blocks = SHAPES[kind]
    return DemoNet(in_dim, stem, width, blocks)


def synthetic_batch(model: DemoNet, batch: int, generator: torch.Generator):
    """A batch of random inputs labelled by a fixed rule, so the loss can go down."""
    x = torch.randn(batch, model.in_dim, generator=generator)
    y = (x[:, :10].argmax(dim=1)).long()
    return x, y


class SyntheticBatches(torch.utils.data.IterableDataset):
    """``batches`` synthetic batches for ``model`` (a DataLoader with ``batch_size=None`` serves
    them); ``delay_s`` is slept before each one, as a slow storage or decoder would."""

    def __init__(self, model: DemoNet, batch: int, batches: int, seed: int, delay_s: float = 0.0):
        self.model, self.batch, self.batches, self.seed, self.delay_s = model, batch, batches, seed, delay_s

    def __iter__(self):
        gen = torch.Generator().manual_seed(self.seed)
        for _ in range(self.batches):
            if self.delay_s:
                time.sleep(self.delay_s)
            yield synthetic_batch(self.model, self.batch, gen)

    def __len__(self) -> int:
        return self.batches

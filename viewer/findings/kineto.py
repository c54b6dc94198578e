"""Findings about a torch.profiler (Kineto) run: the GPU's idle time, kernel launch overhead, and
communication the compute does not hide."""
from __future__ import annotations

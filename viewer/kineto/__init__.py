"""Kineto (torch.profiler) traces: reading, aligning, merging and analysing them (docs/KINETO.md)."""

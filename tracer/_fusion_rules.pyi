"""Types of the fusion plan in C (tracer/_fusion_rules.c)."""
from collections.abc import Sequence

def plan(priorities: Sequence[int] | None, keys: Sequence[int] | None, sizes: Sequence[int] | None,
         threshold: int) -> list[list[int]]: ...

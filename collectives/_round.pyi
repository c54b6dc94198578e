"""Types of the bit round's MPI calls and the engine's wait (collectives/core/round_mpi.c)."""
from typing import Any

ROUND: int
MESSAGE: int
SUBMITTED: int

class Round:
    """The bit round's Iallreduce(BAND) of uint64 words on one communicator."""

    def __init__(self, comm_f: int) -> None: ...
    def post(self, send: Any, recv: Any) -> None: ...
    def test(self) -> bool: ...
    @property
    def pending(self) -> bool: ...

def wait(round: Round, ctrl_f: int, source: int, tag: int, queue: Any, timeout_s: float,
         pauses: int, spins: int, yields: int, first_sleep_s: float,
         max_sleep_s: float) -> tuple[int, int]: ...

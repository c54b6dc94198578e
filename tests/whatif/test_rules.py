"""The replay plans fusion as the runtime does: both take the rules from tracer/fusion_rules.py,
and on the same ready tensors the coordinator's plan_responses and the replay's policy give the
same batches in the same order."""
from __future__ import annotations

import random

import pytest

from collectives import coordinator, fusion
from collectives import messages as M
from tracer import fusion_rules
from tracer import vocab as V
from viewer.whatif import policy
from viewer.whatif.rebuild import Tensor


def test_one_module_of_rules():
    assert fusion.fuse is fusion_rules.fuse and fusion.by_priority is fusion_rules.by_priority
    assert coordinator.flush_due is fusion_rules.flush_due


def _case(seed):
    rng = random.Random(seed)
    out = []
    for k in range(40):
        op = rng.choice([V.ALLREDUCE] * 4 + [V.ALLGATHER])
        out.append((f"t{k}", op, rng.choice(["float32", "float16"]), rng.choice([4, 512, 40_000, 300_000]),
                    rng.choice([0, 0, 0, 2])))
    return out


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("threshold", [0, 64 << 10, 1 << 20])
def test_same_batches_as_the_coordinator(seed, threshold):
    case = _case(seed)
    items = [coordinator.Ready((0, name), {r: M.Request(r, name, op, dt, (n // 4,), nbytes=n, priority=p)
                                            for r in (0, 1)}) for name, op, dt, n, p in case]
    ids = iter(range(10**6))
    runtime = [resp.names for resp in fusion.plan_responses(items, threshold, lambda: next(ids))]
    tensors = [Tensor(name, op, dt, n, 0, p, False, {}, {}, backend="ring") for name, op, dt, n, p in case]
    # everything ready on both ranks at once, nothing partly submitted: one flush of all
    submit = [{0: 1000.0, 1: 1000.0} for _ in case]
    plans = policy.coordinator(list(range(len(case))), tensors, submit, threshold, cycle_ns=1e6)
    assert len({d for d, _ in plans}) == 1
    assert [[tensors[i].name for i in b] for _, b in plans] == runtime
    assert len(runtime) < len(case) or threshold == 0


def test_a_partly_submitted_tensor_holds_the_flush_for_a_cycle():
    tensors = [Tensor(f"t{i}", V.ALLREDUCE, "float32", 4, 0, 0, False, {}, {}, backend="ring") for i in range(2)]
    submit = [{0: 0.0, 1: 0.0}, {0: 0.0, 1: 5e6}]   # t1 only on rank 0 until 5 ms
    plans = policy.coordinator([0, 1], tensors, submit, 1 << 20, cycle_ns=1e6)
    assert [(d, b) for d, b in plans] == [(1e6, [0]), (5e6, [1])]   # t0 waited one cycle, then alone


def _round_decisions(submit, starts, cycle_ns, round_ns=1e6):
    tensors = [Tensor(f"t{i}", V.ALLREDUCE, "float32", 4, 0, 0, True, {}, {}, backend="ring")
               for i in range(len(submit))]
    out = []
    policy.rounds(list(range(len(submit))), tensors, submit, starts, 1 << 20, cycle_ns, round_ns,
                  lambda d, b: out.append((d, b)) or d + 1e5)
    return out


def test_a_round_posted_before_the_submission_costs_one_more_round_not_a_cycle():
    """The engine's bit rounds: rank 1 posts its round after submitting t0, rank 0 before (its
    round from the idle spell was in flight). That round decides nothing; as soon as it completes
    rank 0 posts again (its new work woke it), and so does rank 1 (its t0 still waits:
    BitRounds.retry), so t0 runs one round later whatever the cycle."""
    submit = [{0: 0.5e6, 1: 0.2e6}]
    starts = {0: 0.0, 1: 0.3e6}
    first = 0.2e6 + 1e6   # rank 1's post, then the round
    assert _round_decisions(submit, starts, cycle_ns=10e6) == [(first + 1e6, [0])]
    assert _round_decisions(submit, starts, cycle_ns=1e6) == [(first + 1e6, [0])]


def test_rounds_decide_what_every_rank_submitted_before_posting():
    """Posted at once on new work: both ranks submit t0 before their first post, t1 later; t0
    goes in the first round, t1 in the next, fused with nothing submitted after it."""
    submit = [{0: 0.0, 1: 0.0}, {0: 1.5e6, 1: 1.6e6}]
    got = _round_decisions(submit, {0: 0.0, 1: 0.0}, cycle_ns=5e6)
    assert got == [(1e6, [0]), (1.6e6 + 1e6, [1])]


def test_rounds_end_when_submissions_fall_between_integer_ns():
    """Trace times are integer ns, a replay's stretched submissions are not: a post kept as an
    integer never reached a submission 0.02 ns after it, and the replay looped for ever."""
    submit = [{0: 1_000, 1: 1_000}, {0: 2_000_000.02, 1: 2_000_000.02}]
    got = _round_decisions(submit, {0: 0, 1: 0}, cycle_ns=1e6, round_ns=0)
    assert sorted(i for _, b in got for i in b) == [0, 1]

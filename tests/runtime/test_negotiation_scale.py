"""The negotiation-scale simulation (bench/negotiation_scale.py) at small sizes.

Structural, not timed: both paths plan the same fused response, and what rank 0 handles on the
cached path (its words, the decoded result) does not grow with the number of ranks.
"""
from bench import negotiation_scale as N


def test_full_and_cached_paths_plan_the_same_responses():
    entries = N._entries(20, nbytes=1024)
    for ranks in (4, 16, 64):
        _, full = N.full_cycle(ranks, entries)
        _, _, cached = N.cached_cycle(ranks, entries)
        assert full == cached == 1, (ranks, full, cached)   # 20 x 1 KiB fuse into one


def test_cached_round_words_do_not_grow_with_ranks():
    entries = N._entries(20, nbytes=1024)
    sizes = set()
    for ranks in (4, 64, 1024):
        rounds = N._rounds(ranks, entries)
        for e in entries:
            status, c = rounds.caches[0].lookup(e)
            assert status == 0 and c is not None   # HIT
            rounds.pending[0][c.bit] = e
        v = rounds.vector()
        sizes.add(v.nbytes)
        res = rounds.decode(v)   # a job where every rank submitted the same: AND = own words
        assert res.ready[0] == list(range(20)) and res.invalid[0] == []
    assert len(sizes) == 1, sizes


def test_measure_reports_each_case():
    res = N.measure(ranks=(4, 8), tensors=10, reps=1, tensor_counts=(5,))
    cases = [(r["ranks"], r["tensors"]) for r in res["rows"]]
    assert cases == [(4, 10), (8, 10), (8, 5)]
    assert all(r["full_ms"] > 0 and r["cached_rank0_ms"] > 0 for r in res["rows"])

"""The fusion plan in C (tracer._fusion_rules.plan), the one implementation behind
tracer.fusion_rules.by_priority and fuse and the engine's cached path."""
from tracer._fusion_rules import plan
from tracer.fusion_rules import by_priority, fuse


def test_higher_priority_first_readiness_order_among_equals():
    assert plan([0, 2, 0, 2, -1], None, None, 0) == [[1], [3], [0], [2], [4]]
    assert by_priority("abcde", {"a": 0, "b": 2, "c": 0, "d": 2, "e": -1}.get) == list("bdace")


def test_greedy_fusion_skips_what_does_not_fit_and_never_fuses_without_a_key():
    # 0 takes 1 (10 bytes); 3 does not fit (15) and starts a later batch with 5; 2 has no key
    assert plan(None, [0, 0, -1, 0, 1, 0], [5, 5, 1, 5, 1, 5], 10) == [[0, 1], [2], [3, 5], [4]]
    assert plan(None, [0, 0], [20, 1], 10) == [[0], [1]]   # a first unit over the threshold is alone
    assert plan(None, [0, 0], [1, 1], 0) == [[0], [1]]     # threshold 0: no fusion
    assert plan([], [], [], 10) == []


def test_fuse_maps_keys_by_equality():
    units = [("a", 1.0), ("b", None), ("c", 1), ("d", "x")]
    assert fuse(units, lambda u: u[1], lambda u: 4, 100) == [[units[0], units[2]], [units[1]], [units[3]]]

"""Batch serialisation cuts the array back into exactly the lines per-event serialisation gives."""
import json

from tracer import format as fmt


def _events(nested: bool):
    args = {"tensor": 'odd "name" },{"name": x', "shape": [3, 4], "bytes": 48, "step": 2}
    recs = [("b", "t", "t", None, 1_000, None, args, 2, None),
            ("X", 4, "RING_ALLREDUCE", "comm", 1_000, 9_000, {"tensors": ["a", "b"]}, 2, None),
            ("C", None, "queue_depth", None, 2_000, 5, None, -1, None)]
    if nested:
        recs.append(("i", 2, "STALL", "negotiation", 3_000, None,
                     {"x": [{"name": "a"}, {"name": "b"}]}, 2, None))
    return [fmt.to_event(r, 0, 0) for r in recs]


def test_dumps_many_equals_one_dumps_per_event():
    for nested in (False, True):   # a nested {"name": ...} object takes the per-event path
        evs = _events(nested)
        lines = fmt.dumps_many(evs)
        assert lines == [fmt.dumps(e) for e in evs]
        assert [json.loads(x) for x in lines] == json.loads(json.dumps(evs))
    assert fmt.dumps_many([]) == [] and fmt.dumps_many(_events(False)[:1]) == [fmt.dumps(_events(False)[0])]

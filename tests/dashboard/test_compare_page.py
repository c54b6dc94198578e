"""The Compare page's head is ``ringscope diff``: verdict, a waterfall from A's step to B's that adds up,
the movers, and links into each run's timeline at its median step (real sample runs, no browser)."""
from __future__ import annotations

import pytest

from tests.dashboard.conftest import SAMPLES, sample_run
from viewer.dashboard import compare
from viewer.dashboard.callbacks_url import parse
from viewer.dashboard.registry import Held
from viewer.run import Run


def _held(name):
    path = sample_run(name)
    if path is None:
        pytest.skip(f"sample run {SAMPLES / name} is absent")
    return Held(name, name, Run.load(path, cache=False))


def _find(node, cid):
    """The component of id ``cid`` in a Dash tree."""
    if getattr(node, "id", None) == cid:
        return node
    kids = getattr(node, "children", None)
    for k in kids if isinstance(kids, (list, tuple)) else [kids] if kids is not None else []:
        got = _find(k, cid)
        if got is not None:
            return got
    return None


def test_compare_head_is_the_diff(tmp_path):
    a, b = _held("healthy"), _held("slow-data")
    body = compare.head(a, b)
    d = compare.diff_of(a, b)
    assert compare.diff_of(a, b) is d   # computed once per pair
    root = type("Root", (), {"children": body, "id": None})()
    verdict = _find(root, "cmp-verdict")
    assert "rank 2 is a new straggler" in str(verdict.children[0].children)
    fall = _find(root, "cmp-waterfall").figure.data[0]
    assert list(fall.x)[0] == "A's step" and list(fall.x)[-1] == "B's step"
    assert abs(fall.y[0] + sum(fall.y[1:-1]) - fall.y[-1]) < 1e-6   # the phases carry A's step to B's
    ends = [b + v for b, v in zip(fall.base, fall.y)]
    assert fall.base[0] == fall.base[-1] == 0 and abs(ends[-2] - fall.y[-1]) < 1e-6
    assert all(abs(fall.base[i + 1] - ends[i]) < 1e-9 for i in range(len(fall.y) - 2))   # each from where the last left
    assert _find(root, "cmp-movers") is not None
    for held, side, cid in ((a, d["a"], "cmp-link-a"), (b, d["b"], "cmp-link-b")):
        view = parse(_find(root, cid).href)
        assert view["run"] == held.id and view["page"] == "timeline"
        assert view["step"] in side["steady_steps"] and view["window"] is not None

"""A run of many ranks made by ``bench/tracegen.py`` from a real one: the planted straggler and slow link are found."""
from __future__ import annotations

import json
from pathlib import Path

from bench import tracegen
from viewer.cli import summarize

ROOT = Path(__file__).resolve().parents[2]


def test_the_planted_straggler_among_128_ranks_is_the_first_finding(tmp_path, capsys):
    # the real two-host run whose cross-host link ran at 200 Mbit/s, as 16 hosts x 8 ranks
    tracegen.build(ROOT / "sample_traces" / "two-hosts-slow-link", tmp_path / "run", 128, 1,
                   straggler=97, delay_ms=600, ranks_per_host=8)
    assert summarize.main([str(tmp_path / "run"), "--json", "--no-cache"]) == 0
    out = capsys.readouterr()
    data = json.loads(out.out)
    assert out.err == ""   # the planted lateness is consistent: no damaged line
    assert data["run"]["size"] == 128 and data["headline"]["late_rank"] == 97
    kinds = [f["kind"] for f in data["findings"]]
    assert kinds[0] == "straggler" and data["findings"][0]["evidence"]["ranks"] == [97]
    assert "slow_link" in kinds

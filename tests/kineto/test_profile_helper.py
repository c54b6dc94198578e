"""collectives.torch.profile (hvd.timeline.profile): torch.profiler's traces land under the run
directory, named so the viewer knows their rank."""
from __future__ import annotations

import pytest


def test_run_directory_follows_the_timeline(tmp_path, monkeypatch):
    from collectives.torch.profile import run_directory

    monkeypatch.delenv("HOROVOD_TIMELINE", raising=False)
    monkeypatch.setenv("RINGSCOPE_TIMELINE", str(tmp_path) + "/")
    assert run_directory() == tmp_path
    monkeypatch.setenv("RINGSCOPE_TIMELINE", str(tmp_path / "t.json"))
    assert run_directory() == tmp_path
    monkeypatch.setenv("RINGSCOPE_TIMELINE", str(tmp_path / "x" / "rank-{rank:05d}.json"))
    assert run_directory() == tmp_path / "x"
    assert run_directory(tmp_path / "y") == tmp_path / "y"


def test_profile_writes_a_kineto_trace_the_viewer_reads(tmp_path):
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install -e .[torch])")
    from collectives.torch.profile import SUBDIR, profile
    from viewer.run import Run

    x = torch.randn(64, 64)
    with profile(tmp_path, wait=0, warmup=1, active=2, rank=3) as prof:
        for _ in range(3):
            (x @ x).sum()
            prof.step()
    files = list((tmp_path / SUBDIR).glob("rank3.*.pt.trace.json"))
    assert len(files) == 1
    run = Run.load(tmp_path / SUBDIR)
    assert run.ranks["rank"].tolist() == [3] and run.ranks["format"].tolist() == ["kineto"]
    steps = sorted(run.events.loc[run.events["name"].str.startswith("ProfilerStep#"), "step"])
    assert steps == [1, 2]
    assert run.events["name"].str.contains("aten::mm").any()

"""An elastic run assembled from two REAL worlds of the runtime (mpiexec, numpy allreduces): the first,
3 ranks, fails when rank 2 SIGKILLs itself in step 6 (mpiexec then kills the others: every trace cut);
the second, 2 ranks, goes on from the commit after step 3, as the driver relaunches it. elastic.json is
written by hand from the traces' own times, as the driver would record them (docs/ELASTIC.md)."""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from tests.mpi_util import run_mpi
from viewer import Run

SCRIPT = Path(__file__).parent / "scripts" / "train_worlds.py"


def _epoch(run, t_ns):
    return int(run.meta["origin_epoch_ns"] + t_ns)


def _load(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Run.load(path, cache=False)


@pytest.fixture(scope="module")
def real_elastic(tmp_path_factory):
    d = tmp_path_factory.mktemp("elastic-real") / "run"
    worlds = [(3, {"START": 0, "STEPS": 8, "DIE_RANK": 2, "DIE_STEP": 6, "GENERATION": 0}),
              (2, {"START": 4, "STEPS": 4, "GENERATION": 1, "NO_RESET_RANK": 1})]
    for g, (n, env) in enumerate(worlds):
        (d / f"gen-{g:03d}").mkdir(parents=True)
        env = {"RINGSCOPE_TIMELINE": str(d / f"gen-{g:03d}") + "/", "COMMIT_EVERY": 4,
               "RINGSCOPE_TIMELINE_FLUSH_S": 0.05, "RINGSCOPE_CACHE_DIR": str(d.parent / "cache"), **env}
        proc = run_mpi(n, [SCRIPT], env=env, timeout=240)
        assert (proc.returncode != 0) == (g == 0), proc.stdout[-3000:]
    g0, g1 = _load(d / "gen-000"), _load(d / "gen-001")
    ev0, ev1 = g0.events, g1.events
    commit = ev0[(ev0["name"] == "ELASTIC_COMMIT") & (ev0["rank"] == 0)].iloc[0]
    last = dict(zip(g0.ranks["rank"], g0.ranks["last_ts_ns"]))
    restore = ev1[ev1["name"] == "ELASTIC_RESTORE"]
    first = ev1[(ev1["name"] == "STEP") & (ev1["step"] == 4)]
    ends = {
        "last_commit_epoch_ns": _epoch(g0, commit["t_ns"] + commit["dur_ns"]),
        "failed_epoch_ns": _epoch(g0, last[2]), "detected_epoch_ns": _epoch(g0, max(last.values())),
        "relaunched_epoch_ns": int(g1.meta["origin_epoch_ns"]),
        "reformed_epoch_ns": int(max(g1.ranks["base_epoch_ns"])),
        "restored_epoch_ns": _epoch(g1, (restore["t_ns"] + restore["dur_ns"]).max()),
        "first_step_end_epoch_ns": _epoch(g1, (first["t_ns"] + first["dur_ns"]).max()),
    }
    gens = [{"generation": g, "size": n, "hosts": [f"localhost:{n}"], "end": "failure" if g == 0 else "done",
             "step_base": [0, 4][g], "start_epoch_ns": int(run.meta["origin_epoch_ns"]),
             "end_epoch_ns": _epoch(run, max(run.ranks["last_ts_ns"]))} for g, ((n, _), run) in
            enumerate(zip(worlds, (g0, g1)))]
    manifest = {"elastic_format": 1, "min_np": 2, "max_np": 3, "generations": gens, "resets": [{
        "generation_before": 0, "generation_after": 1, "kind": "lost",
        "cause": "rank 2 (host localhost) exited: killed by signal 9", "lost": [{"rank": 2, "host": "localhost"}],
        "added": [], "size_before": 3, "size_after": 2, "last_commit_step": 3, **ends}]}
    (d / "elastic.json").write_text(json.dumps(manifest))
    return d, manifest, g1


def test_real_worlds_load_as_one_run(real_elastic):
    d, manifest, g1 = real_elastic
    run = _load(d)
    assert sorted(zip(run.ranks["rank"], run.ranks["generation"])) == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0)]
    assert run.size == 2
    bd = run.breakdown_steps()
    bd = bd[bd["step"] >= 0]
    assert not bd.duplicated(["rank", "step"]).any()
    assert sorted(bd[bd["rank"] == 0]["step"]) == list(range(8))
    assert sorted(bd[bd["rank"] == 2]["step"]) == [0, 1, 2, 3]   # its steps 4, 5 were redone without it
    alone = g1.breakdown_steps().set_index(["rank", "step"])["step_ns"]
    for rank in (0, 1):
        for step in (4, 5):   # the second world's copy counts
            got = bd[(bd["rank"] == rank) & (bd["step"] == step)]["step_ns"].iloc[0]
            assert got == alone.loc[(rank, step)]
    neg = run.negotiations()
    assert sorted(neg["step"].unique()) == list(range(8))
    assert (neg[neg["step"] >= 4].groupby(["tensor", "step"])["rank"].nunique() == 2).all()
    assert not len(run.hangs())   # the failed step 6 of the first world is redone work, not a hang
    assert not set(run.findings()["kind"]) & {"rank_died", "hang", "truncated"}


def test_real_worlds_recovery_row(real_elastic):
    d, manifest, _ = real_elastic
    rec = _load(d).recoveries()
    r, m = rec.iloc[0], manifest["resets"][0]
    assert len(rec) == 1 and r["kind"] == "lost"
    assert r["redone_ms"] == pytest.approx((m["failed_epoch_ns"] - m["last_commit_epoch_ns"]) / 1e6)
    assert r["lost_ms"] == pytest.approx((m["first_step_end_epoch_ns"] - m["failed_epoch_ns"]) / 1e6)
    assert r["redone_ms"] > 0 and r["lost_ms"] > r["first_step_ms"] > 0
    assert r["ranks_with_slice"] == [0] and r["ranks_missing_slice"] == [1]

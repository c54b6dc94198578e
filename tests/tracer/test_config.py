"""Path rules and environment switches of the timeline (tracer.config, tracer.configure)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

import tracer
from tracer.config import TimelineConfigError, parse_steps, rank_path, settings_from_env
from tracer.recorder import NullRecorder


def test_rank_placeholder():
    assert rank_path("/x/t-{rank}.json", 3) == Path("/x/t-3.json")
    assert rank_path("/x/t-{rank:05d}.json", 3) == Path("/x/t-00003.json")


def test_bad_placeholder_is_a_config_error():
    with pytest.raises(TimelineConfigError, match=r"\{rank\}"):
        rank_path("/x/t-{host}.json", 3)


def test_directory_rules(tmp_path):
    assert rank_path(str(tmp_path), 7) == tmp_path / "rank-00007.json"
    assert rank_path(str(tmp_path / "new") + "/", 12) == tmp_path / "new" / "rank-00012.json"


def test_plain_file_gets_rank_before_suffix():
    assert rank_path("/x/timeline.json", 3) == Path("/x/timeline.rank-00003.json")
    assert rank_path("/x/timeline", 0) == Path("/x/timeline.rank-00000.json")


def test_two_ranks_never_share_a_file(tmp_path):
    for spec in (str(tmp_path / "t.json"), str(tmp_path) + "/", str(tmp_path / "r{rank}.json")):
        assert rank_path(spec, 0) != rank_path(spec, 1)


def test_steps_window():
    assert parse_steps("100-200") == (100, 200)
    assert parse_steps("5-") == (5, None)
    for bad in ("200-100", "abc", "7", "-3-4"):
        with pytest.raises(TimelineConfigError, match="RINGSCOPE_TIMELINE_STEPS"):
            parse_steps(bad)


def test_horovod_names_honoured_and_ours_win():
    s = settings_from_env({"HOROVOD_TIMELINE": "/tmp/h.json", "HOROVOD_TIMELINE_MARK_CYCLES": "1",
                           "HOROVOD_DISABLE_NVTX_RANGES": "1"})
    assert (s.spec, s.source, s.mark_cycles, s.nvtx) == ("/tmp/h.json", "HOROVOD_TIMELINE", True, False)
    s = settings_from_env({"HOROVOD_TIMELINE": "/tmp/h.json", "RINGSCOPE_TIMELINE": "/tmp/r.json"})
    assert (s.spec, s.source) == ("/tmp/r.json", "RINGSCOPE_TIMELINE")


def test_bad_values_are_one_line_errors():
    for env, name in (({"RINGSCOPE_TIMELINE_MAX_MB": "lots"}, "RINGSCOPE_TIMELINE_MAX_MB"),
                      ({"RINGSCOPE_TIMELINE_MARK_CYCLES": "maybe"}, "RINGSCOPE_TIMELINE_MARK_CYCLES"),
                      ({"RINGSCOPE_TIMELINE_CAP_MODE": "shrink"}, "RINGSCOPE_TIMELINE_CAP_MODE")):
        with pytest.raises(TimelineConfigError) as e:
            settings_from_env(env)
        assert name in str(e.value) and "\n" not in str(e.value)


def test_unset_means_null_recorder(env):
    assert isinstance(tracer.configure({"rank": 0}), NullRecorder)


def test_configure_writes_rank_file_under_directory(env, tmp_path):
    env(RINGSCOPE_TIMELINE=str(tmp_path) + "/")
    rec = tracer.configure({"rank": 2, "size": 4})
    assert rec.enabled and rec.path == tmp_path / "rank-00002.json"
    assert rec.path.exists()   # created at init, not at the first event


def test_horovod_timeline_env_works(env, tmp_path):
    env(HOROVOD_TIMELINE=str(tmp_path / "hvd.json"))
    rec = tracer.configure({"rank": 1})
    assert rec.path == tmp_path / "hvd.rank-00001.json"
    tracer.close()
    assert (tmp_path / "hvd.rank-00001.json").stat().st_size > 0


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere; the /proc case still runs")
def test_unwritable_directory_is_an_error_at_init(env, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    env(RINGSCOPE_TIMELINE=str(ro / "t.json"))
    with pytest.raises(TimelineConfigError, match="cannot write timeline file"):
        tracer.configure({"rank": 0})


def test_impossible_path_is_an_error_at_init(env, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for spec in (str(blocker / "sub" / "t.json"), "/proc/ringscope-nope/t.json"):
        env(RINGSCOPE_TIMELINE=spec)
        with pytest.raises(TimelineConfigError) as e:
            tracer.configure({"rank": 0})
        msg = str(e.value)
        assert "RINGSCOPE_TIMELINE" in msg and "cannot write" in msg and "\n" not in msg


def test_dynamic_writes_nothing_until_started(env, tmp_path):
    env(RINGSCOPE_TIMELINE="DYNAMIC")
    rec = tracer.configure({"rank": 0})
    assert isinstance(rec, NullRecorder) and list(tmp_path.iterdir()) == []

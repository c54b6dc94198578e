"""Truncated and garbled Kineto files: one line naming the file (rc 2), or the loss reported (rc 0),
never a traceback. Inputs: the real DDP job's traces (Kineto's multi-line layout) and, when ../shared
is there, a real GPU trace written on one line."""
from __future__ import annotations

import contextlib
import gzip
import io
import json
import random

import pytest

from tests.viewer.conftest import ROOT

SHARED = ROOT.parent / "shared" / "kineto_traces"


def _cli(main, argv):
    o, e = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
        try:
            rc = main(argv)
        except BaseException as exc:  # noqa: BLE001 - a traceback is what this looks for
            raise AssertionError(f"{argv}: {type(exc).__name__}: {exc}") from None
    return rc, o.getvalue(), e.getvalue().splitlines()


def _outcome(path, rc, err, lossy: bool) -> str:
    if rc == 2:
        assert len(err) == 1 and err[0].startswith(f"ringscope: {path}"), err
        return "error"
    assert rc == 0, err
    assert all(x.startswith("ringscope: warning: ") and str(path) in x for x in err), err
    if lossy:
        assert err, f"{path}: events were lost and nothing said so"
    return "loss reported" if err else "clean"


def _sources(ddp_run) -> dict:
    out = {"ddp": sorted(ddp_run.glob("*.json"))[0].read_bytes()}
    pair = SHARED / "pair_128rank_job" / "rank-0.json.gz"
    if pair.exists():
        out["one-line"] = gzip.decompress(pair.read_bytes())
    return out


def test_truncated_files_keep_their_complete_events(ddp_run, tmp_path):
    from viewer.cli import summarize

    rng = random.Random(29)
    for name, data in _sources(ddp_run).items():
        full = len(json.loads(data)["traceEvents"])
        start = data.find(b'"traceEvents"') + 200
        for k, cut in enumerate(sorted(rng.sample(range(start, len(data) - 3), 6))):
            p = tmp_path / f"{name}-cut{k}.pt.trace.json"
            p.write_bytes(data[:cut])
            rc, out, err = _cli(summarize.main, [str(p), "--json", "--no-cache"])
            got = _outcome(p, rc, err, lossy=True)
            if got == "error":
                assert "no trace events" in err[0], err
                continue
            assert any("truncated trace" in x or "unfinished trace" in x for x in err), err
            run = json.loads(out)["run"]
            assert run["truncated_ranks"] == [0] and 0 < run["events"] < full


def test_a_cut_after_a_bracket_in_an_events_args_is_a_truncation(tmp_path):
    """Cut where an event's args end a list (``[]``): the file stops at a bracket, which is not the
    event array's end (Kineto's object form closes with a brace after it)."""
    from viewer.cli import summarize

    ev = ('  {{\n    "ph": "X", "cat": "cpu_op", "name": "{}", "pid": 1, "tid": 1, "ts": {}, "dur": 1.0,\n'
          '    "args": {{"Input Dims": [[2, 2], []]}}\n  }}')
    events = ",\n".join(ev.format(n, t) for n, t in (("a", 1.0), ("b", 3.0), ("c", 5.0)))
    full = '{\n  "schemaVersion": 1,\n  "traceEvents": [\n' + events + '\n  ],\n  "traceName": "x"\n}\n'
    p = tmp_path / "cut.pt.trace.json"
    p.write_text(full[:full.rindex("[]") + 2])
    rc, out, err = _cli(summarize.main, [str(p), "--json", "--no-cache"])
    assert _outcome(p, rc, err, lossy=True) == "loss reported"
    assert len(err) == 1 and "truncated trace" in err[0] and "recovered 2 complete events" in err[0], err
    assert json.loads(out)["run"]["truncated_ranks"] == [0]


def test_garbled_files_skip_the_damage_and_say_where(ddp_run, tmp_path):
    from viewer.cli import merge, summarize

    rng = random.Random(2929)
    outcomes: dict = {}
    for name, data in _sources(ddp_run).items():
        body = data.find(b'"traceEvents"') + 20
        for k in range(16):
            b = bytearray(data)
            kind = k % 3
            if kind == 0:      # bytes flipped in the event array
                for _ in range(rng.randint(1, 4)):
                    b[rng.randrange(body, len(b) - 10)] = rng.randrange(256)
            elif kind == 1:    # a piece cut out of the middle
                at = rng.randrange(body, len(b) - 2000)
                del b[at:at + rng.randrange(5, 1500)]
            else:              # a value of the wrong type
                at = b.find(b'"ts":', rng.randrange(body, len(b) - 2000))
                if at > 0:
                    b[at + 5:at + 5] = b'"x",'
            p = tmp_path / f"{name}-garbled{k}.json"
            p.write_bytes(bytes(b))
            main, extra = (summarize.main, ["--json", "--no-cache"]) if k % 2 else \
                (merge.main, ["-o", str(tmp_path / "m.json")])
            rc, out, err = _cli(main, [str(p), *extra])
            got = _outcome(p, rc, err, lossy=kind == 2)
            outcomes[got] = outcomes.get(got, 0) + 1
    assert outcomes.get("loss reported", 0) >= 10, outcomes


def test_a_damaged_event_in_the_middle_is_skipped_with_its_line(ddp_run, tmp_path):
    from viewer.run import Run

    data = sorted(ddp_run.glob("*.json"))[0].read_bytes()
    at = data.find(b'"name": "gloo:all_reduce"')
    bad = data[:at] + b'"name": gloo:all_reduce"' + data[at + len(b'"name": "gloo:all_reduce"'):]
    p = tmp_path / "rank0.pt.trace.json"
    p.write_bytes(bad)
    with pytest.warns(UserWarning, match=r"damaged line\(s\), 1 event\(s\) lost: line \d+ \(not valid JSON"):
        run = Run.load(p)
    whole = Run.load(sorted(ddp_run.glob("*.json"))[0])
    assert len(run.events) == len(whole.events) - 1 and len(run.fused_ops) == len(whole.fused_ops) - 1
    assert run.ranks["closed"].all()


@pytest.mark.parametrize("data, why", [
    (b"", "empty file"),
    (b'{"schemaVersion": 1, "traceEvents": []}', "no trace events"),
    (b'{"schemaVersion": 1, "distributedInfo": {"rank": 0}, "traceEvents": [{"ph": "M", "name": "x"}]}',
     "no trace events"),
    (b'{"schemaVersion": 1, "traceEvents": {"ph": "X"}}', "'traceEvents' is not an array"),
    (b'{"schemaVersion": 1, "deviceProperties": [}, "traceEvents": []}', "not valid JSON before"),
    (b'{"schemaVersion": 1, "traceEvents": [{"ph": "X", "name": "a", "ts": "x", "dur": 1, "pid": 1, "tid": 1}]}',
     "1 unusable event(s) skipped"),
    (b"\x1f\x8b\x08\x00garbage", "gzip"),
])
def test_bad_files_get_one_line(tmp_path, data, why):
    from viewer.cli import merge, summarize

    p = tmp_path / "rank0.pt.trace.json"
    p.write_bytes(data)
    for main, extra in ((summarize.main, ["--no-cache"]), (merge.main, ["-o", str(tmp_path / "m.json")])):
        rc, _, err = _cli(main, [str(p), *extra])
        assert rc == 2 and len(err) == 1 and str(p) in err[0] and why in err[0], err


def test_cut_gzip_warns(ddp_run, tmp_path):
    from viewer.cli import summarize

    gz = gzip.compress(sorted(ddp_run.glob("*.json"))[0].read_bytes())
    p = tmp_path / "rank0.pt.trace.json.gz"
    p.write_bytes(gz[: len(gz) * 2 // 3])
    rc, out, err = _cli(summarize.main, [str(p), "--json", "--no-cache"])
    assert rc == 0 and len(err) == 1 and "gzip stream cut" in err[0] and json.loads(out)["run"]["events"] > 0


def test_times_far_from_the_rest_are_left_out_and_reported(tmp_path):
    from viewer.run import Run

    ev = [{"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1, "ts": 1.7e15 + i * 10, "dur": 5}
          for i in range(20)]
    ev[7]["ts"] = 9e16      # beyond int64 ns from the others once in ns
    ev[9]["dur"] = 5e13
    p = tmp_path / "rank0.pt.trace.json"
    p.write_text(json.dumps({"schemaVersion": 1, "traceEvents": ev}))
    with pytest.warns(UserWarning, match="2 event\\(s\\) lost: \\('ts' or 'dur' more than 11 days away"):
        run = Run.load(p)
    assert len(run.events) == 18 and run.events["t_ns"].max() == 190_000

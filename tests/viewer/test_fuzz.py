"""Seeded fuzz of every loader entry point with damaged traces (issue #27).

Inputs are mutations of real traces (sample_traces/ and, when ../shared is there, real Horovod
timelines): truncations, byte flips, deleted or duplicated lines, wrong types, missing keys, bad
otherData, non-UTF-8, empty and odd shapes, plain/corrupt/cut/multi-member .gz, gzip bombs, deep nesting,
array <-> object, and run directories of mixed or duplicate ranks. Each goes in-process through
the dashboard's loader and either ``ringscope summarize --json`` or ``ringscope merge``; a few run as
real subprocesses with their peak memory measured. Every input must give rc 2 with one
stderr line naming the file, or rc 0 with any loss reported; never a traceback, a crash or a hang.
"""
from __future__ import annotations

import contextlib
import gzip
import io
import json
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.viewer.conftest import ROOT

SEED = 27
CAP = 16 << 20            # RINGSCOPE_MAX_TRACE_BYTES during the fuzz
SAMPLES = ["large-tensors/rank-00001.json.gz", "large-tensors/rank-00000.json.gz", "hang/rank-00002.json.gz"]
HOROVOD = ["horovod0281_gloo_2ranks.json", "modern_mpi_broadcast_1rank.json"]
FIELDS = ("ts", "dur", "pid", "tid", "args", "name", "ph", "cat")
BAD_VALUES = ('"x"', "null", "[]", "{}", "[null]", "true", "1e400", "-1e400", str(2 ** 64), str(-2 ** 63 - 5),
              '"\\ud800"', "1.5", "-7")
BAD_OTHER = ('"x"', "[1]", '{"ringscope": 5}', '{"ringscope": {"rank": "a", "part": [1], "fusion_threshold": "x",'
             ' "base_epoch_ns": 1e300, "size": -4, "cycle_time_ms": "y", "host": 7, "backend": [1]}}',
             '{"ringscope": {"format_version": "3", "rank": 2.5, "clock_offset_ns": {}}}')


def _sources() -> dict:
    src = {f"sample:{n}": gzip.decompress((ROOT / "sample_traces" / n).read_bytes()) for n in SAMPLES}
    hv = ROOT.parent / "shared" / "horovod_timelines"
    for n in HOROVOD:
        if (hv / n).exists():
            src[f"horovod:{n}"] = (hv / n).read_bytes()
    return src


def _lines(data: bytes) -> list:
    return data.split(b"\n")


def _event_line(rng, lines):
    """A line holding one event, not a metadata one."""
    idx = [i for i, x in enumerate(lines) if b'"ph"' in x and b'"M"' not in x]
    return rng.choice(idx) if idx else 0


def _set_field(rng, data):
    lines = _lines(data)
    i = _event_line(rng, lines)
    field, value = rng.choice(FIELDS), rng.choice(BAD_VALUES)
    import re

    new = b'"' + field.encode() + b'":' + value.encode()
    line, n = re.subn(rb'"' + field.encode() + rb'":\s*("[^"]*"|\{[^{}]*\}|[^,}]*)', lambda m: new, lines[i], count=1)
    lines[i] = line if n else lines[i].replace(b"{", b'{"' + field.encode() + b'":' + value.encode() + b",", 1)
    lossy = field in ("ts", "ph", "name") and not (field == "ts" and value in ("1.5", "-7")) \
        and not (field != "ts" and value == '"x"')
    return b"\n".join(lines), lossy


def _missing_key(rng, data):
    import re

    lines = _lines(data)
    i = _event_line(rng, lines)
    field = rng.choice(("ts", "ph", "name", "args", "tid", "dur"))
    lines[i] = re.sub(rb'"' + field.encode() + rb'":\s*("[^"]*"|\{[^{}]*(\{[^{}]*\})?[^{}]*\}|[^,}]*),?', b"",
                      lines[i], count=1)
    return b"\n".join(lines), field in ("ts", "ph", "name")


def _truncate(rng, data):
    return data[:rng.randrange(1, max(2, len(data) - 3))], True


def _flip(rng, data):
    b = bytearray(data)
    for _ in range(rng.randint(1, 6)):
        b[rng.randrange(len(b))] = rng.randrange(256)
    return bytes(b), False


def _delete_line(rng, data):
    lines = _lines(data)
    del lines[rng.randrange(len(lines))]
    return b"\n".join(lines), False


def _dup_line(rng, data):
    lines = _lines(data)
    i = rng.randrange(len(lines))
    lines.insert(i, lines[i])
    return b"\n".join(lines), False


def _cut_line(rng, data):
    """A line cut in the middle, the file going on after it."""
    lines = _lines(data)
    i = _event_line(rng, lines)
    lines[i] = lines[i][:rng.randrange(1, max(2, len(lines[i]) - 2))]
    return b"\n".join(lines), True


def _non_utf8(rng, data):
    lines = _lines(data)
    i = _event_line(rng, lines)
    at = lines[i].find(b'"name":"') + 8 if b'"name":"' in lines[i] else len(lines[i]) // 2
    lines[i] = lines[i][:at] + rng.choice((b"\xff\xfe", b"\xc3\x28", b"\xed\xa0\x80")) + lines[i][at:]
    return b"\n".join(lines), False


def _other_data(rng, data):
    import re

    new = b'"otherData": ' + rng.choice(BAD_OTHER).encode()
    out, n = re.subn(rb'"otherData":\s*\{"ringscope":\s*\{[^\n]*?\}\}', lambda m: new, data, count=1)
    return out, False


def _form_swap(rng, data):
    """Object form to array form (the header lost) or array form to object form."""
    s = data.lstrip()
    if s.startswith(b"["):
        return b'{"traceEvents": ' + s + (b"}" if s.rstrip().endswith(b"]") else b""), False
    i = s.find(b"[")
    return s[i:].rstrip().rstrip(b"}"), False


def _deep_args(rng, data):
    lines = _lines(data)
    i = _event_line(rng, lines)
    depth = rng.choice((100, 5000, 100_000))
    lines[i] = lines[i].replace(b'"args":', b'"args":' + b'{"a":' * depth + b"1" + b"}" * depth + b',"x":', 1)
    return b"\n".join(lines), False


MUTATIONS = [_set_field, _set_field, _missing_key, _truncate, _flip, _delete_line, _dup_line, _cut_line,
             _non_utf8, _other_data, _form_swap, _deep_args]

FIXED = {
    "zero-bytes": b"", "spaces": b"   \n", "empty-array": b"[]", "empty-events": b'{"traceEvents":[]}',
    "empty-object": b"{}", "null-array": b"[null]", "null-events": b'{"traceEvents":[null]}',
    "null": b"null", "number": b"5", "string": b'"x"', "array-of-arrays": b"[[1],[2]]",
    "deep-array": b"[" * 100_000 + b"]" * 100_000, "deep-object": b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
    "deep-events": b'{"traceEvents":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "events-not-array": b'{"traceEvents":{"ph":"X"}}', "binary": bytes(range(256)) * 4,
    "utf16": '{"traceEvents":[]}'.encode("utf-16"), "bom": b"\xef\xbb\xbf[]",
    "one-meta-only": b'[{"ph":"M","name":"process_name","pid":0,"args":{"name":"x"}}]',
    "only-header": b'{"otherData":{"ringscope":{"format_version":3,"rank":0}},"traceEvents":[\n',
}


def _bomb(expanded: int, fill: bytes = b" ") -> bytes:
    """A multi-member gzip that expands to ``expanded`` bytes of ``fill`` (cheap to build)."""
    member = gzip.compress(fill * (1 << 20), 9)
    return member * (expanded >> 20)


def _gz_variants(rng, data: bytes) -> list:
    gz = gzip.compress(data, 1)
    cut = gz[:rng.randrange(10, max(11, len(gz) - 1))]
    bad = bytearray(gz)
    for _ in range(3):
        bad[rng.randrange(10, len(bad))] ^= 0xFF
    k = rng.randrange(1, len(data))
    multi = gzip.compress(data[:k]) + gzip.compress(data[k:])
    return [("gz", gz, False), ("gz-cut", cut, True), ("gz-corrupt", bytes(bad), False),
            ("gz-multi", multi, False), ("gz-padded", gz + b"\x00" * 64, False)]


def _inputs(tmp: Path) -> list:
    """``[(path, kind, lossy)]``: ``lossy`` when the mutation surely loses events (then rc 0 must say so)."""
    rng = random.Random(SEED)
    out = []
    n = 0

    def put(kind, data, lossy, suffix=".json"):
        nonlocal n
        p = tmp / f"in-{n:04d}-{kind}{suffix}"
        p.write_bytes(data)
        out.append((p, kind, lossy))
        n += 1

    sources = _sources()
    for name, data in FIXED.items():
        put(name, data, False)
        put(name, gzip.compress(data), False, ".json.gz")
    put("gz-zero-bytes", b"", False, ".json.gz")
    put("gz-header-only", b"\x1f\x8b\x08\x00", False, ".json.gz")
    put("gz-bomb-spaces", _bomb(CAP * 4), False, ".json.gz")
    put("gz-bomb-zeros", _bomb(CAP * 2, b"\x00"), False, ".json.gz")
    head = gzip.decompress((ROOT / "sample_traces" / SAMPLES[0]).read_bytes())
    put("gz-bomb-after-trace", gzip.compress(head) + _bomb(CAP * 2), False, ".json.gz")
    for data in sources.values():
        put("clean", data, False)
        for kind, blob, lossy in _gz_variants(rng, data):
            put(kind, blob, lossy, ".json.gz")
    per_source = 460 // len(sources)
    for data in sources.values():
        for _ in range(per_source):
            mut = rng.choice(MUTATIONS)
            blob, lossy = mut(rng, data)
            if rng.random() < 0.15:
                put(mut.__name__.strip("_") + "-gz", gzip.compress(blob, 1), lossy, ".json.gz")
            else:
                put(mut.__name__.strip("_"), blob, lossy)
    return out


def _cli(main, argv):
    """(rc, stdout, stderr lines) of an in-process CLI main; any exception out of it fails the test."""
    o, e = io.StringIO(), io.StringIO()
    t0 = time.monotonic()
    with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
        try:
            rc = main(argv)
        except BaseException as exc:  # noqa: BLE001 - a traceback is what the fuzz looks for
            import traceback
            raise AssertionError(f"{argv}: {type(exc).__name__}: {exc}\n{traceback.format_exc()[-1500:]}") from None
    took = time.monotonic() - t0
    assert took < 20, f"{argv}: took {took:.1f} s (a hang?)"
    return rc, o.getvalue(), e.getvalue().splitlines()


def _check_outcome(path, kind, lossy, rc, out, err, what):
    if rc == 2:
        assert len(err) == 1 and str(path) in err[0] and err[0].startswith("ringscope: "), (what, kind, err)
        assert "Traceback" not in err[0]
        return "error"
    assert rc == 0, (what, kind, rc, err)
    assert all(x.startswith("ringscope: warning: ") and str(path) in x for x in err), (what, kind, err)
    if lossy:
        assert err, f"{what} {kind} {path}: events were lost but nothing was reported"
    return "loss reported" if err else "clean"


@pytest.fixture(scope="module")
def fuzz_inputs(tmp_path_factory):
    return _inputs(tmp_path_factory.mktemp("fuzz"))


@pytest.fixture(autouse=True)
def _cap(monkeypatch):
    monkeypatch.setenv("RINGSCOPE_MAX_TRACE_BYTES", str(CAP))


def test_every_mutation_gives_one_line_or_a_reported_loss(fuzz_inputs, tmp_path, capsys):
    """Each input through the dashboard's loader, and alternately through ``summarize --json`` and
    ``merge`` (the analyses cost ~50 ms an input: all of them through summarize would take a minute)."""
    from viewer.cli import merge, summarize
    from viewer.dashboard.registry import LoadError, load_run

    assert len(fuzz_inputs) >= 500
    outcomes: dict = {}
    for i, (path, kind, lossy) in enumerate(fuzz_inputs):
        if i % 2 == 0:
            what = "summarize"
            rc, out, err = _cli(summarize.main, [str(path), "--json", "--no-cache"])
        else:
            what = "merge"
            rc, out, err = _cli(merge.main, [str(path), "-o", str(tmp_path / "merged.json")])
        # merge passes on what a trace viewer can still show (an event without a name, say)
        sure = lossy and not (what == "merge" and kind.startswith(("missing_key", "set_field")))
        got = _check_outcome(path, kind, sure, rc, out, err, what)
        outcomes.setdefault(what, {})[got] = outcomes.get(what, {}).get(got, 0) + 1
        if rc == 0 and what == "summarize":
            data = json.loads(out)
            assert data["run"]["events"] > 0
            if any("damaged line" in x for x in err):
                assert data["run"]["skipped"]
            if any("truncated" in x or "unfinished" in x for x in err):
                assert data["run"]["truncated_ranks"]
        elif rc == 0:
            assert json.loads((tmp_path / "merged.json").read_bytes())["traceEvents"]
        try:
            run, notes = load_run(path)
            got = "loaded"
        except LoadError as exc:
            assert str(path) in str(exc) and "\n" not in str(exc), kind
            got = "error"
        else:
            assert len(run.events) > 0 and all("\n" not in x for x in notes)
        outcomes.setdefault("dashboard", {})[got] = outcomes.get("dashboard", {}).get(got, 0) + 1
    with capsys.disabled():
        print(f"\nfuzz: {len(fuzz_inputs)} inputs: {outcomes}")
    for what in ("summarize", "merge"):
        o = outcomes[what]
        assert o.get("error", 0) > 10 and o.get("loss reported", 0) > 50 and o.get("clean", 0) > 10, outcomes


def _run_dir(tmp, name, files: dict) -> Path:
    d = tmp / name
    d.mkdir()
    for fname, data in files.items():
        (d / fname).write_bytes(data)
    return d


def test_run_directories_of_mixed_duplicate_and_damaged_ranks(tmp_path):
    from viewer.cli import merge, summarize

    src = ROOT / "sample_traces" / "healthy"
    r0, r1 = (src / "rank-00000.json.gz").read_bytes(), (src / "rank-00001.json.gz").read_bytes()
    raw1 = gzip.decompress(r1)
    dup = _run_dir(tmp_path, "dup", {"rank-00000.json.gz": r0, "rank-00001.json.gz": r1, "copy.json.gz": r1})
    for main, extra in ((summarize.main, ["--json", "--no-cache"]),
                        (merge.main, ["-o", str(tmp_path / "m.json")])):
        rc, _, err = _cli(main, [str(dup), *extra])
        assert rc == 2 and len(err) == 1 and "rank 1 also comes from" in err[0], err
    half = raw1[: len(raw1) // 2]
    damaged = _run_dir(tmp_path, "damaged", {"rank-00000.json.gz": r0, "rank-00001.json": half})
    rc, out, err = _cli(summarize.main, [str(damaged), "--json", "--no-cache"])
    assert rc == 0 and json.loads(out)["run"]["truncated_ranks"] == [1] and len(err) == 1
    empty = _run_dir(tmp_path, "empty-rank", {"rank-00000.json.gz": r0, "rank-00001.json": b"[]"})
    rc, _, err = _cli(summarize.main, [str(empty), "--no-cache"])
    assert rc == 2 and len(err) == 1 and "rank-00001.json" in err[0] and "no trace events" in err[0]
    hv = ROOT.parent / "shared" / "horovod_timelines" / HOROVOD[0]
    if hv.exists():
        mixed = _run_dir(tmp_path, "mixed", {"rank-00000.json.gz": r0, "horovod.json": hv.read_bytes()})
        rc, out, err = _cli(summarize.main, [str(mixed), "--json", "--no-cache"])
        assert rc == 2 and len(err) == 1 and "rank 0 also comes from" in err[0], err


def _subprocess(args, tmp: Path, env_extra=None):
    """A real ``ringscope`` process: (rc, stderr lines, peak RSS in bytes)."""
    import os

    rss = tmp / "rss"
    code = ("import resource, sys\nfrom viewer.cli import main\nrc = main(sys.argv[1:])\n"
            f"open({str(rss)!r}, 'w').write(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024))\n"
            "sys.exit(rc)\n")
    env = {**os.environ, "RINGSCOPE_MAX_TRACE_BYTES": str(CAP), **(env_extra or {})}
    p = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True,
                       timeout=120, env=env)
    return p.returncode, p.stderr.splitlines(), int(rss.read_text()) if rss.exists() else 0


def test_real_processes_bomb_and_cut_files(tmp_path):
    """As a user runs them: one-line errors, no traceback; a gzip bomb stops at the cap, in memory."""
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(_bomb(CAP * 8))
    base_rc, _, base_rss = _subprocess(["summarize", str(ROOT / "sample_traces" / "large-tensors"), "--no-cache",
                                        "--json"], tmp_path)
    assert base_rc == 0
    for cmd in (["summarize", str(bomb)], ["merge", str(bomb), "-o", str(tmp_path / "m.json")]):
        rc, err, rss = _subprocess(cmd, tmp_path)
        assert rc == 2 and len(err) == 1 and str(bomb) in err[0] and "RINGSCOPE_MAX_TRACE_BYTES" in err[0], err
        assert rss < base_rss + 3 * CAP + (64 << 20), f"{cmd[0]}: peak {rss >> 20} MiB for a {CAP >> 20} MiB cap"
    null = tmp_path / "null.json"
    null.write_bytes(b"[null]")
    cut = tmp_path / "cut.json"
    cut.write_bytes(gzip.decompress((ROOT / "sample_traces/hang/rank-00001.json.gz").read_bytes())[:20000])
    for f, want in ((null, 2), (cut, 0)):
        rc, err, _ = _subprocess(["summarize", str(f), "--json"], tmp_path)
        assert rc == want and len(err) == 1 and str(f) in err[0] and "Traceback" not in "".join(err), err

"""Seeded fuzz of every loader entry point with damaged traces (issues #27 and #41).

Inputs are mutations of real traces, per reader (our sample_traces/; from ../shared, real Horovod
timelines and a real Kineto trace, each family skipped visibly when absent): truncations, byte flips,
deleted or duplicated lines, wrong types, missing keys, extreme integers (±2^63-1, 2^63, -2^63, 2^53+1,
large negatives) in any numeric field, a wrong type in one field on every line, bad otherData,
non-UTF-8, empty and odd shapes, plain/corrupt/cut/multi-member .gz, gzip bombs, deep nesting, array <->
object, and run directories of mixed or duplicate ranks. Each goes in-process through the dashboard's
loader and either ``ringscope summarize --json`` or ``ringscope merge``; a few run as real subprocesses
with their peak memory measured. Every input must give rc 2 with one stderr line naming the file, or
rc 0 with any loss reported and tables that hold no impossible figure (a negative duration, a lifecycle
out of order); never a traceback, a crash or a hang.
"""
from __future__ import annotations

import contextlib
import functools
import gzip
import io
import json
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.viewer.conftest import ROOT

SEED = 27
CAP = 16 << 20            # RINGSCOPE_MAX_TRACE_BYTES during the fuzz
SHARED = ROOT.parent / "shared"
SAMPLES = ["large-tensors/rank-00001.json.gz", "large-tensors/rank-00000.json.gz", "hang/rank-00002.json.gz"]
HOROVOD = ["horovod0281_gloo_2ranks.json", "modern_mpi_broadcast_1rank.json"]
KINETO = ["pair_128rank_job/rank-0.json.gz"]   # the smallest real one (4.8k events)
FAMILIES = {"ringscope": (ROOT / "sample_traces", SAMPLES), "horovod": (SHARED / "horovod_timelines", HOROVOD),
            "kineto": (SHARED / "kineto_traces", KINETO)}
FIELDS = ("ts", "dur", "pid", "tid", "args", "name", "ph", "cat")
BAD_VALUES = ('"x"', "null", "[]", "{}", "[null]", "true", "1e400", "-1e400", str(2 ** 64), str(-2 ** 63 - 5),
              '"\\ud800"', "1.5", "-7")
BAD_OTHER = ('"x"', "[1]", '{"ringscope": 5}', '{"ringscope": {"rank": "a", "part": [1], "fusion_threshold": "x",'
             ' "base_epoch_ns": 1e300, "size": -4, "cycle_time_ms": "y", "host": 7, "backend": [1]}}',
             '{"ringscope": {"format_version": "3", "rank": 2.5, "clock_offset_ns": {}}}')


def _sources(family: str) -> dict:
    """``{name: bytes}`` of one reader's real traces; skips the test (visibly) when they are absent."""
    where, names = FAMILIES[family]
    missing = [n for n in names if not (where / n).exists()]
    if missing:
        pytest.skip(f"{family} traces not present at {where} ({', '.join(missing)}: ../shared is absent)")
    src = {}
    for n in names:
        data = (where / n).read_bytes()
        data = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
        if family == "kineto":   # written on one line: one event per line, as Kineto's own writer has them
            data = data.replace(b'}, {"ph"', b'},\n{"ph"')
        src[f"{family}:{n}"] = data
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


EXTREMES = (2 ** 63 - 1, -(2 ** 63 - 1), 2 ** 63, -2 ** 63, 2 ** 53 + 1, -(2 ** 53 + 1), 2 ** 32 + 1, -10 ** 12)
_NUMBER = re.compile(rb'"([A-Za-z_][^"\\]{0,40})"(\s*:\s*)(-?\d[\d.eE+-]*)')


def _numbers(data: bytes) -> dict:
    """``{key: [(start, end, in_events)]}``: where each numeric field's value is (header keys too)."""
    events_at = max(data.find(b'"traceEvents"'), 0)
    out: dict = {}
    for m in _NUMBER.finditer(data):
        out.setdefault(m.group(1).decode(), []).append((m.start(3), m.end(3), m.start() > events_at))
    return out


def _outside(family: str, key: str, value: int) -> bool:
    """The reader must leave out, and report, an event holding ``value`` in ``key``: the field cannot
    mean it (a step, size, count, duration or time that overflows int64 arithmetic or goes negative)."""
    from viewer.io import ranges
    from viewer.kineto.events import ARG_RANGES
    from viewer.ringscope.reader import INT_ARGS

    if key in ("tid", "pid"):   # identifiers: any int64 (Kineto: any integer or string)
        return family == "ringscope" and not -2 ** 63 <= value < 2 ** 63
    if key == "ts":   # Kineto's events lie at epoch µs (~1.7e15): every extreme is far from the others
        return family == "kineto" or abs(value) > ranges.MAX_US
    if key == "dur":
        return not 0 <= value <= (ranges.MAX_SPREAD_US if family == "kineto" else ranges.MAX_US)
    limits = {"ringscope": INT_ARGS, "kineto": {k.removeprefix("args."): v for k, v in ARG_RANGES.items()},
              "horovod": {"start_time_since_epoch_in_micros": (0, ranges.MAX_EPOCH_NS // 1000)}}[family]
    return key in limits and not limits[key][0] <= value < limits[key][1]


def _extreme_int(rng, data, family):
    """An extreme integer in one numeric field of one event (or of the header)."""
    found = _numbers(data)
    if not found:
        return data, False
    key = rng.choice(sorted(found))
    lo, hi, in_events = rng.choice(found[key])
    value = rng.choice(EXTREMES)
    return data[:lo] + str(value).encode() + data[hi:], in_events and _outside(family, key, value)


_VALUE = rb'("[^"]*"|\{[^{}]*\}|\[[^\[\]]*\]|[^,}\s]*)'
EVERY_LINE = {"ph": ("5", "null", '"Q"'), "name": ("7", "[]"), "ts": ('"x"', "null"), "dur": ('"x"', "-1"),
              "pid": ("[]",), "tid": ("{}",), "cat": ("5",), "args": ("[1]",)}
DEADLY = ("ph", "name", "ts")   # each event needs them: wrong on every line, nothing is left to read


def _on_every_line(data: bytes, field: str, value: str) -> bytes:
    """``field`` set to ``value`` in every event that has it."""
    at = max(data.find(b'"traceEvents"'), 0)
    pattern = re.compile(rb'"' + field.encode() + rb'"(\s*:\s*)' + _VALUE)
    return data[:at] + pattern.sub(lambda m: b'"' + field.encode() + b'"' + m.group(1) + value.encode(), data[at:])


def _every_line(rng, data):
    """One field of the wrong type (or a negative duration) on every line."""
    field = rng.choice(sorted(EVERY_LINE))
    blob = _on_every_line(data, field, rng.choice(EVERY_LINE[field]))
    return blob, blob != data   # (the format may have no such field)


def _mutations(family: str) -> list:
    extreme = functools.partial(_extreme_int, family=family)
    extreme.__name__ = "_extreme_int"   # the inputs' kind
    return [_set_field, _set_field, _missing_key, _truncate, _flip, _delete_line, _dup_line, _cut_line,
            _non_utf8, _other_data, _form_swap, _deep_args, extreme, extreme, extreme, _every_line]


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


# mutations of each real trace, drawn from the fixed SEED: a regression set sized for CI's time (Kineto's one
# small trace needs more to reach every outcome); a hunt for new cases raises these and changes SEED locally
# (375 inputs found the issue-41 cases)
PER_SOURCE = {"ringscope": 30, "horovod": 30, "kineto": 50}


def _inputs(tmp: Path, family: str) -> list:
    """``[(path, kind, lossy)]``: ``lossy`` when the mutation surely loses events (then rc 0 must say so).
    The inputs that are no trace of any format go with our own traces' family."""
    rng = random.Random(f"{SEED}:{family}")
    out = []
    n = 0

    def put(kind, data, lossy, suffix=".json"):
        nonlocal n
        p = tmp / f"in-{n:04d}-{kind}{suffix}"
        p.write_bytes(data)
        out.append((p, kind, lossy))
        n += 1

    sources = _sources(family)
    if family == "ringscope":
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
    mutations = _mutations(family)
    for data in sources.values():
        for _ in range(PER_SOURCE[family]):
            mut = rng.choice(mutations)
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


@pytest.fixture(autouse=True)
def _cap(monkeypatch):
    monkeypatch.setenv("RINGSCOPE_MAX_TRACE_BYTES", str(CAP))


def _sane(tables) -> None:
    """No impossible figure in a loaded run's tables: what a damaged event must never become."""
    import pandas as pd

    def never(mask, what):
        mask = pd.Series(mask).fillna(False).astype(bool)
        assert not mask.any(), f"{what}: {int(mask.sum())} row(s)"

    ev, ops, fused = tables.events, tables.tensor_ops, tables.fused_ops
    never(ev["dur_ns"] < 0, "events of negative duration")
    never(ev["step"] < -1, "events of a negative step")
    never(ev["bytes"] < 0, "events of negative bytes")
    never(ops["negotiated_ns"] < ops["submit_ns"], "ops negotiated before they were submitted")
    never(ops["start_ns"] < ops["negotiated_ns"], "ops started before they were negotiated")
    never(ops["end_ns"] < ops["submit_ns"], "ops that ended before they were submitted")
    never(ops["bytes"] < 0, "ops of negative bytes")
    never(fused["end_ns"] < fused["start_ns"], "responses that ended before they started")
    for c in ("bytes", "count", "size", "comm_ns", "memcpy_in_ns", "memcpy_out_ns"):
        never(fused[c] < 0, f"responses of negative {c}")
    never(tables.cycles["end_ns"] < tables.cycles["start_ns"], "cycles that ended before they started")
    never(tables.readiness["rank"] < 0, "readiness of a negative rank")


def _load(path, kind):
    """The dashboard's loader on one input: "loaded" (its tables sane) or "error" (one line naming it)."""
    from viewer.dashboard.registry import LoadError, load_run

    try:
        run, notes = load_run(path)
    except LoadError as exc:
        assert str(path) in str(exc) and "\n" not in str(exc), kind
        return "error"
    assert len(run.events) > 0 and all("\n" not in x for x in notes)
    _sane(run.tables)
    return "loaded"


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_mutation_gives_one_line_or_a_reported_loss(family, tmp_path, capsys):
    """Each input through the dashboard's loader, and alternately through ``summarize --json`` and
    ``merge`` (the analyses cost ~50 ms an input: all of them through summarize would take a minute)."""
    from viewer.cli import merge, summarize

    (tmp_path / "in").mkdir()
    inputs = _inputs(tmp_path / "in", family)
    outcomes: dict = {}
    for i, (path, kind, lossy) in enumerate(inputs):
        if i % 2 == 0:
            what = "summarize"
            rc, out, err = _cli(summarize.main, [str(path), "--json", "--no-cache"])
        else:
            what = "merge"
            rc, out, err = _cli(merge.main, [str(path), "-o", str(tmp_path / "merged.json")])
        # merge passes on what a trace viewer can still show (an event without a name, say)
        sure = lossy and not (what == "merge" and kind.startswith(("missing_key", "set_field", "extreme_int",
                                                                   "every_line")))
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
        got = _load(path, kind)
        outcomes.setdefault("dashboard", {})[got] = outcomes.get("dashboard", {}).get(got, 0) + 1
    with capsys.disabled():
        print(f"\nfuzz {family}: {len(inputs)} inputs: {outcomes}")
    least = max(1, len(inputs) // 60)
    for what in ("summarize", "merge"):
        o = outcomes[what]
        assert min(o.get("error", 0), o.get("loss reported", 0), o.get("clean", 0)) >= least, outcomes


def _batches(rng, data: bytes, values, per_file: int = 24):
    """Files of ``data`` with up to ``per_file`` numeric fields changed, each in another event: every
    numeric field found (header keys too) with every value of ``values(key)``, across the batches.
    Yields ``(blob, [(key, value, in_events)])``."""
    found = _numbers(data)
    todo = [(k, v) for k in sorted(found) for v in values(k)]
    rng.shuffle(todo)
    for b in range(0, len(todo), per_file):
        taken, edits = set(), []
        for key, value in todo[b:b + per_file]:
            free = [x for x in found[key] if x[0] not in taken]
            if free:
                lo, hi, in_events = rng.choice(free)
                taken.add(lo)
                edits.append((lo, hi, key, value, in_events))
        blob = data
        for lo, hi, _, value, _ in sorted(edits, reverse=True):
            blob = blob[:lo] + str(value).encode() + blob[hi:]
        yield blob, [(k, v, e) for _, _, k, v, e in edits]


@pytest.mark.parametrize("family", list(FAMILIES))
def test_extreme_integers_in_every_numeric_field(family, tmp_path):
    """Every numeric field of the events and the header, set to each extreme integer (and, for the
    fields a reader holds to a range, to both ends of it): one line or a reported loss, never a
    traceback or an impossible figure; a value outside a field's range is always a reported loss."""
    from viewer.cli import summarize
    from viewer.ringscope.reader import INT_ARGS

    rng = random.Random(f"{SEED}:extreme:{family}")
    edges = INT_ARGS if family == "ringscope" else {}

    def values(key):
        lo_hi = edges.get(key)
        return EXTREMES + ((lo_hi[0], lo_hi[1] - 1) if lo_hi else ())

    n = 0
    for name, data in list(_sources(family).items())[:1]:   # one trace a format: all its fields, all values
        for blob, edits in _batches(rng, data, values):
            path = tmp_path / f"extreme-{n:03d}.json"
            path.write_bytes(blob)
            n += 1
            lossy = any(e and _outside(family, k, v) for k, v, e in edits)
            rc, out, err = _cli(summarize.main, [str(path), "--json", "--no-cache"])
            _check_outcome(path, f"{name} {edits}", lossy, rc, out, err, "summarize")
            if rc == 0 and lossy:
                assert json.loads(out)["run"]["events_skipped"] > 0, edits
            _load(path, edits)
    assert n >= 2   # the smallest format (Horovod's modern file) fills two batches


@pytest.mark.parametrize("family", list(FAMILIES))
def test_a_wrong_field_on_every_line(family, tmp_path):
    """One field of the wrong type (or a negative duration) in every event: when it is one every event
    needs (ph, name, ts), nothing is readable, and that is one line naming the file (exit 2), never
    a silent success; otherwise the loss is reported."""
    from viewer.cli import merge, summarize

    n = 0
    for name, data in list(_sources(family).items())[:1]:   # each field the same way in every trace of a format
        for field, bad in EVERY_LINE.items():
            for value in bad:
                blob = _on_every_line(data, field, value)
                if blob == data:   # no event of this format has the field
                    continue
                path = tmp_path / f"every-{n:03d}.json"
                path.write_bytes(blob)
                n += 1
                kind = f"{name} {field}={value}"
                rc, out, err = _cli(summarize.main, [str(path), "--json", "--no-cache"])
                got = _check_outcome(path, kind, True, rc, out, err, "summarize")
                assert got == "error" or field not in DEADLY, (kind, err)
                rc, out, err = _cli(merge.main, [str(path), "-o", str(tmp_path / "merged.json")])
                # merge passes names and args on; without a phase or a time it has nothing to place
                got = _check_outcome(path, kind, field in ("ph", "ts"), rc, out, err, "merge")
                assert got == "error" or field not in ("ph", "ts"), (kind, err)
                assert _load(path, kind) == "error" or field not in DEADLY, kind
    assert n >= len(EVERY_LINE)


def _first_line_with(data: bytes, *needles: bytes) -> int:
    lines = _lines(data)
    return next(i for i, x in enumerate(lines) if all(n in x for n in needles))


@pytest.mark.parametrize("case", ["step", "size", "queue_ns", "ph-everywhere"])
def test_issue_41_cases(case, tmp_path):
    """The four a fuzz run found (issue 41): 2^63-1 in one event's step (a tensor op), size (a
    backend activity) or queue_ns (a response), and ph of the wrong type on every line."""
    from viewer.cli import merge, summarize

    data = gzip.decompress((ROOT / "sample_traces" / SAMPLES[0]).read_bytes())
    big = str(2 ** 63 - 1).encode()
    if case == "ph-everywhere":
        blob = _on_every_line(data, "ph", "5")
    else:
        lines = _lines(data)
        i = _first_line_with(data, *{"step": (b'"cat":"tensor"', b'"step":0'), "size": (b'"cat":"comm"', b'"size":'),
                                     "queue_ns": (b'"queue_ns":',)}[case])
        lines[i] = re.sub(rb'"' + case.encode() + rb'":-?\d+', b'"' + case.encode() + b'":' + big, lines[i], count=1)
        blob = b"\n".join(lines)
    path = tmp_path / f"{case}.json"
    path.write_bytes(blob)
    rc, out, err = _cli(summarize.main, [str(path), "--json", "--no-cache"])
    if case == "ph-everywhere":
        assert rc == 2 and len(err) == 1 and str(path) in err[0] and "no trace events" in err[0], err
        rc, _, err = _cli(merge.main, [str(path), "-o", str(tmp_path / "m.json")])
        assert rc == 2 and len(err) == 1 and str(path) in err[0] and "no trace events" in err[0], err
        return
    assert rc == 0 and json.loads(out)["run"]["events_skipped"] == 1, err
    assert any(f"'args.{case}'" in x for x in err), err
    assert _load(path, case) == "loaded"


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
    assert rc == 0 and json.loads(out)["run"]["truncated_ranks"] == [1]
    assert len(err) == 2 and "truncated" in err[0] and "2 of 4 ranks have no trace (rank 2, 3)" in err[1], err
    empty = _run_dir(tmp_path, "empty-rank", {"rank-00000.json.gz": r0, "rank-00001.json": b"[]"})
    rc, _, err = _cli(summarize.main, [str(empty), "--no-cache"])   # a bad rank is left out, the rest analysed
    assert rc == 0 and len(err) == 2 and "rank-00001.json: no trace events; left out" in err[0], err
    assert "3 of 4 ranks have no trace (rank 1, 2, 3)" in err[1], err
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

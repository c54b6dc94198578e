"""The C event scanner (viewer.io._eventscan): columns equal to a JSON parser's values, on real traces
and on made-up edge cases; damage recorded where it is, with where reading goes on."""
from __future__ import annotations

import gzip
import json
import random

import numpy as np
import orjson
import pytest

from tests.viewer.conftest import ROOT
from viewer.io import _eventscan

SHARED = ROOT.parent / "shared" / "kineto_traces"
READ, ABSENT, NULL, TYPE = 1, 0, 2, 3


def _scan(text: bytes, fields, lines=True):
    data = bytearray(text)
    return _eventscan.scan(data, 0, len(data), fields, lines)


def _values(got, name, dtype=None):
    """Python values of one column (None where not read), and the status per row."""
    st, raw, *rest = got["columns"][name]
    st = np.frombuffer(st, dtype=np.uint8)
    if rest and len(rest) == 1:
        codes = np.frombuffer(raw, dtype=np.int32)
        vals = [rest[0][c] if s == READ else None for c, s in zip(codes, st)]
    elif rest:
        ends = np.frombuffer(raw, dtype=np.int64)
        items = np.frombuffer(rest[0], dtype=np.int32)
        begins = np.r_[0, ends[:-1]]
        vals = [[rest[1][c] for c in items[b:e]] if s == READ else None for b, e, s in zip(begins, ends, st)]
    else:
        arr = np.frombuffer(raw, dtype=dtype)
        vals = [v if s == READ else None for v, s in zip(arr.tolist(), st)]
    return vals, st.tolist()


@pytest.mark.skipif(not SHARED.exists(), reason=f"{SHARED} is absent (the shared Kineto traces)")
@pytest.mark.parametrize("rel", ["nccl_2rank/rank-0.json.gz", "single_rank/rank-0.pt.trace.json.gz",
                                 "pair_128rank_job/rank-0.json.gz"])
def test_real_kineto_traces_read_as_a_json_parser_reads_them(rel):
    from viewer.kineto.events import FIELDS, KinetoReader

    src = SHARED / rel
    events = orjson.loads(gzip.decompress(src.read_bytes()))["traceEvents"]
    reader = KinetoReader(src)
    got = reader.scan(FIELDS)
    assert got["rows"] == len(events) and not got["errors"] and not reader.skipped
    for name, dtype in (("ph", None), ("name", None), ("cat", None), ("pid", None), ("tid", None),
                        ("ts", np.float64), ("dur", np.float64)):
        vals, _ = _values(got, name, dtype)
        assert vals == [e.get(name) for e in events], name
    for key in ("correlation", "stream", "bytes"):
        vals, _ = _values(got, f"args.{key}", np.int64)
        assert vals == [(e.get("args") or {}).get(key) for e in events], key
    spans = zip(np.frombuffer(got["start"], dtype=np.int64), np.frombuffer(got["end"], dtype=np.int64))
    for (a, b), e in list(zip(spans, events))[::997]:
        assert orjson.loads(bytes(reader.data[a:b])) == e


def test_values_of_every_kind_and_status():
    text = b"\n".join([
        b'{"s": "plain", "k": 7, "i": -9223372036854775808, "f": 1712195495519689.047, "args": {"l": ["a", "b"]}},',
        b'{"s": "esc\\"\\u00e9\\ud83d\\ude00\\n", "k": "7", "i": 9223372036854775808, "f": -0.5e-3, "args": null},',
        b'{"s": 5, "k": 1.5, "i": 1.0, "f": "x", "args": {"l": ["a", 1]}, "other": [{"deep": [1, {}]}]},',
        b'{"s": null, "k": null, "i": null, "f": null, "args": {"l": []}},',
        b'{"args": 3, "s": "plain", "s": "last wins"},',
        b'{}',
    ])
    fields = (("s", "s"), ("k", "k"), ("i", "i"), ("f", "f"), ("args", "o"), ("args.l", "l"))
    got = _scan(text, fields)
    assert got["rows"] == 6 and not got["errors"] and not got["glued"]
    assert _values(got, "s") == (["plain", 'esc"é😀\n', None, None, "last wins", None],
                                 [READ, READ, TYPE, NULL, READ, ABSENT])
    assert _values(got, "k") == ([7, "7", None, None, None, None], [READ, READ, TYPE, NULL, ABSENT, ABSENT])
    assert _values(got, "i", np.int64) == ([-(1 << 63), None, None, None, None, None],
                                           [READ, TYPE, TYPE, NULL, ABSENT, ABSENT])
    assert _values(got, "f", np.float64) == ([1712195495519689.047, -0.5e-3, None, None, None, None],
                                             [READ, READ, TYPE, NULL, ABSENT, ABSENT])
    assert _values(got, "args")[1] == [READ, NULL, READ, READ, TYPE, ABSENT]
    assert _values(got, "args.l") == ([["a", "b"], None, None, [], None, None],
                                      [READ, ABSENT, TYPE, READ, ABSENT, ABSENT])


def test_floats_are_the_nearest_double_as_a_json_parser_gives():
    rng = random.Random(29)
    texts = [f"{rng.randrange(10 ** 15, 10 ** 16)}.{rng.randrange(1000):03d}" for _ in range(3000)]
    texts += [f"{rng.randrange(10 ** 19)}.{rng.randrange(10 ** 9)}" for _ in range(1000)]
    texts += [f"-0.{rng.randrange(10 ** 18):018d}" for _ in range(1000)]
    texts += [f"{rng.randrange(10 ** 6)}.{rng.randrange(10 ** 6)}e{rng.randrange(-300, 300)}" for _ in range(1000)]
    texts += ["0", "-0", "1e308", "2.2250738585072014e-308", "5e-324", "1e-400", "123456789012345678901234567890"]
    got = _scan(",\n".join(f'{{"f": {t}}}' for t in texts).encode(), (("f", "f"),))
    vals, st = _values(got, "f", np.float64)
    assert set(st) == {READ} and vals == [orjson.loads(t) * 1.0 for t in texts]


@pytest.mark.parametrize("bad, why", [
    (b'{"name": gloo"}', "unexpected character"),
    (b'{"name": "a\xff"}', "invalid UTF-8"),
    (b'{"name": "\\ud800"}', "lone surrogate"),
    (b'{"name": "a\\q"}', "invalid escape"),
    (b'{"ts": 1e999}', "beyond a double's range"),
    (b'{"ts": 01}', "expected ',' or '}'"),
    (b'{"ts": 1,}', "expected a key"),
    (b'{"ts" 1}', "expected ':'"),
    (b'{"a": [1 2]}', "expected ','"),
    (b'{"name": "tab\there"}', "control character"),
    (b'{"a": ' + b"[" * 300 + b"]" * 300 + b"}", "nested too deeply"),
])
def test_a_damaged_line_is_recorded_and_reading_goes_on(bad, why):
    good = b'{"name": "ok", "ts": 1}'
    text = b",\n".join([good, bad, good])
    got = _scan(text, (("name", "s"), ("ts", "f")))
    assert got["rows"] == 2 and _values(got, "name")[0] == ["ok", "ok"]
    [(at, err_at, msg, nxt)] = got["errors"]
    assert why in msg and at == len(good) + 2 and at <= err_at < at + len(bad) and nxt == len(good) + len(bad) + 4


def test_kineto_damage_resumes_after_the_next_event_end():
    ev = [{"ph": "X", "name": f"op{i}", "ts": i, "args": {"n": {"deep": i}}} for i in range(5)]
    text = ",\n".join(json.dumps(e, indent=2) for e in ev).encode()
    at = text.find(b'"op2"')
    broken = text[:at] + text[at + 1:]          # a quote lost: the event breaks, the next ones read
    got = _scan(broken, (("name", "s"),), lines=False)
    assert _values(got, "name")[0] == ["op0", "op1", "op3", "op4"]
    [(start, err_at, _, nxt)] = got["errors"]
    assert broken[start:start + 1] == b"{" and start < err_at < nxt and broken[nxt:].lstrip().startswith(b",")
    cut = _scan(text[:at + 10], (("name", "s"),), lines=False)   # the file ends inside an event
    assert cut["rows"] == 2 and cut["errors"][0][3] == -1 and cut["stop"] == cut["errors"][0][0]


def test_glued_events_are_read_and_non_objects_recorded():
    got = _scan(b'{"name": "a"}{"name": "b"},\n7,\n"x",\n{"name": "c"}', (("name", "s"),))
    assert _values(got, "name")[0] == ["a", "b", "c"] and got["glued"] == [13]
    assert [text for text in got["other"]] == [(28, 29), (31, 34)] and not got["errors"]
    ndjson = _scan(b'{"name": "a"}\n{"name": "b"}', (("name", "s"),))   # one per line, no commas
    assert _values(ndjson, "name")[0] == ["a", "b"] and not ndjson["glued"]


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError):
        _eventscan.scan(bytearray(b"{}"), 0, 10, (), True)
    with pytest.raises(ValueError):
        _eventscan.scan(bytearray(b"{}"), 0, 2, (("a", "z"),), True)
    with pytest.raises(TypeError):
        _eventscan.scan(bytearray(b"{}"), 0, 2, [("a", "s")], True)

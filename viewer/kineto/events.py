"""One Kineto trace: its header, and its complete (``X``) events as numpy columns (docs/KINETO.md)."""
from __future__ import annotations

import numpy as np

from viewer.io import _eventscan
from viewer.io.chrome_json import _BAD_JSON, JsonTrace, loads
from viewer.io.columns import distinct, lut
from viewer.io.ranges import CHROME_PHASES, MAX_BYTES, outside

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")
# older Kineto (torch 1.8-1.10) spelled some categories differently
_CAT_ALIASES = {"Kernel": "kernel", "Memcpy": "gpu_memcpy", "Memset": "gpu_memset", "Runtime": "cuda_runtime",
                "Operator": "cpu_op", "user_annotation": "user_annotation"}
_SPECIAL = ("nccl", "gloo", "mpi:", "ucc:", "record_param_comms", "ProfilerStep")
MAX_US = 1e17   # beyond this a time is damage (epoch µs today are ~1.8e15)
_ID_MAX = 1 << 62
# the integer args the tables read, and what each can mean: lo <= value < hi
ARG_RANGES = {"args.correlation": (0, _ID_MAX), "args.stream": (0, _ID_MAX), "args.bytes": (0, MAX_BYTES)}
# what the scanner keeps of each event (status per row: 0 absent, 1 read, 2 null, 3 another type)
FIELDS = (("ph", "s"), ("name", "s"), ("cat", "s"), ("pid", "k"), ("tid", "k"), ("ts", "f"), ("dur", "f"),
          ("args", "o"), *((k, "i") for k in ARG_RANGES))
_READ, _ABSENT = 1, 0
_SPACE = b" \t\r\n"


class KinetoReader(JsonTrace):
    """One Kineto trace file (see :class:`JsonTrace`); ``damage``: a broken gzip stream."""

    @property
    def dropped(self) -> bool:
        """The file stopped inside the event array (or its gzip stream broke off)."""
        return not self.closed or self.damage is not None

    def _find_end(self) -> int:
        """Where the event array closes (its ``]`` after an event, with a tail that parses), else the end."""
        data, hi = self.data, self.size
        for _ in range(256):
            k = data.rfind(b"]", self._start, hi)
            if k < 0:
                break
            j = k - 1
            while j >= self._start and data[j] in _SPACE:
                j -= 1
            if j < self._start or data[j] in b"},[":   # after an event, or an empty array
                if self._tail(k + 1):
                    return k
            hi = k
        return self.size

    def _tail(self, pos: int) -> bool:
        """The rest after a candidate ``]`` can end the file (it sets ``closed``)."""
        rest = bytes(self.data[pos:]).strip()
        if not rest or rest == b"}":
            # an object that stops at a bracket was cut (maybe inside an event, at a list of its args)
            self.closed = rest == (b"}" if self.form == "object" else b"")
            return True
        return self._trailing_header(rest)

    def scan(self, fields) -> dict:
        """The event array as columns, its damage recorded (a bad last event in an unclosed file: the cut)."""
        end = self._find_end()
        got = _eventscan.scan(self.data, self._start, end, fields, False)
        for at, err_at, why, nxt in got["errors"]:
            if nxt < 0 and not self.closed:
                self.stop_offset = at
                break
            self.skip(err_at, f"not valid JSON ({why})", max(1, self.data.count(b'"ph"', at, end if nxt < 0 else nxt)))
        for at, _ in got["other"]:
            self.skip(at, "not an event object")
        for at in got["glued"]:
            self.skip(at, "events glued together without a separator (read apart)", 0)
        self.n_events = got["rows"]
        return got


def _col(scanned: dict, name: str, dtype):
    st, raw, *values = scanned["columns"][name]
    return np.frombuffer(st, dtype=np.uint8), np.frombuffer(raw, dtype=dtype), (values[0] if values else None)


class Events:
    """One rank's X events as columns (``cols``), the events kept whole (``special``) and ``bad`` ones' counts."""

    def __init__(self, scanned: dict, data):
        self.bad: dict = {}
        self.process_labels: dict = {}
        self.thread_names: dict = {}   # (pid, tid) -> the trace's name of that thread or stream
        ph_st, ph, ph_v = _col(scanned, "ph", np.int32)
        name_st, name, name_v = _col(scanned, "name", np.int32)
        ts_st, ts, _ = _col(scanned, "ts", np.float64)
        dur_st, dur, _ = _col(scanned, "dur", np.float64)
        pid_st, pid, pid_v = _col(scanned, "pid", np.int32)
        tid_st, tid, tid_v = _col(scanned, "tid", np.int32)
        starts = np.frombuffer(scanned["start"], dtype=np.int64)
        ends = np.frombuffer(scanned["end"], dtype=np.int64)
        self._meta(data, starts, ends, np.flatnonzero(ph == (ph_v.index("M") if "M" in ph_v else -2)))
        self._count(ph_st != _READ, "event without a string 'ph'")
        self._count(np.isin(ph, [k for k, v in enumerate(ph_v) if v not in CHROME_PHASES]) & (ph_st == _READ),
                    "'ph' is not a trace event phase")
        # the checks in order: an event counts once, for the first it fails
        ok = self._check(ph == (ph_v.index("X") if "X" in ph_v else -2), name_st != _READ,
                         "event without a string 'name'")
        bad_t = (ts_st != _READ) | ~(np.abs(ts) < MAX_US) | (dur_st != _READ) & (dur_st != _ABSENT) \
            | ~((dur >= 0) & (dur < MAX_US))
        ok = self._check(ok, bad_t, "'ts' or 'dur' is not a time in µs")
        ok = self._check(ok, (pid_st != _READ) | (tid_st != _READ), "'pid' or 'tid' is not an integer or a string")
        cat_st, cat, cat_v = _col(scanned, "cat", np.int32)
        args_st = _col(scanned, "args", np.uint8)[0]
        ok = self._check(ok, (cat_st > _READ) | (args_st > _READ), "'cat' is not a string or 'args' not an object")
        for k, (lo, hi) in ARG_RANGES.items():
            st, v, _ = _col(scanned, k, np.int64)
            ok = self._check(ok, (st > _READ) | outside(v, st == _READ, lo, hi),
                             f"'{k}' is not an integer it can mean")
        rows = np.flatnonzero(ok)

        cats = [_CAT_ALIASES.get(c, c) for c in cat_v] + [""]
        cat_code, cats = distinct(np.where(cat_st[rows] == _READ, cat[rows], len(cat_v)), cats)
        name_code, names = distinct(name[rows], name_v)
        self.cats = {v: k for k, v in enumerate(cats)}
        self.names = {v: k for k, v in enumerate(names)}
        annotation = self.cats.get("gpu_user_annotation", -2)
        thread_key = (pid[rows].astype(np.int64) * (len(tid_v) + 1) + tid[rows]) * 2 + (cat_code == annotation)
        uniq, first, thread_code = np.unique(thread_key, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")   # lanes numbered in order of first appearance
        rank_of = np.argsort(order).astype(np.int32)
        self.threads = {}
        for k in order:
            r = rows[first[k]]
            key = (pid_v[pid[r]], tid_v[tid[r]])
            self.threads[key + ("annotations",) if uniq[k] & 1 else key] = len(self.threads)
        gpu = lut(list(self.cats), lambda c: c in GPU_CATS)[cat_code]
        tid_int = np.array([v if v.__class__ is int and 0 <= v < _ID_MAX else -1 for v in tid_v] + [-1],
                           dtype=np.int64)
        corr = self._arg(scanned, "args.correlation", rows, -1)
        stream_st = _col(scanned, "args.stream", np.int64)[0][rows]
        s = np.where(stream_st == _ABSENT, tid_int[tid[rows]], self._arg(scanned, "args.stream", rows, -1))   # or tid
        nbytes = self._arg(scanned, "args.bytes", rows, -1)
        self.cols = {   # ts, dur (µs), name, cat, thread (codes), corr, stream, bytes
            "ts": ts[rows].copy(), "dur": np.where(dur_st[rows] == _READ, dur[rows], 0.0),
            "name": name_code, "cat": cat_code, "thread": rank_of[thread_code.reshape(-1)].astype(np.int32),
            "corr": corr, "stream": np.where(gpu, s, -1), "bytes": np.where(gpu, nbytes, -1),
        }
        special = lut(list(self.names), lambda n: n.startswith(_SPECIAL))[name_code]
        self.special = [(int(r), e) for r in np.flatnonzero(special)
                        if (e := _whole(data, starts[rows[r]], ends[rows[r]])) is not None]

    def _count(self, mask, why: str) -> None:
        n = int(mask.sum())
        if n:
            self.bad[why] = self.bad.get(why, 0) + n

    def _check(self, ok, bad, why: str):
        self._count(ok & bad, why)
        return ok & ~bad

    @staticmethod
    def _arg(scanned: dict, name: str, rows, fill: int):
        st, v, _ = _col(scanned, name, np.int64)
        return np.where(st[rows] == _READ, v[rows], fill)

    def _meta(self, data, starts, ends, rows) -> None:
        """Process labels and thread names from the metadata events (each parsed alone: there are a few)."""
        for r in rows:
            e = _whole(data, starts[r], ends[r]) or {}
            a = e.get("args")
            pid, tid = e.get("pid"), e.get("tid")
            if a.__class__ is not dict or pid.__class__ not in (int, str):
                continue
            if e.get("name") == "process_labels" and a.get("labels").__class__ is str:
                self.process_labels[pid] = a["labels"]
            elif e.get("name") == "thread_name" and a.get("name").__class__ is str and tid.__class__ in (int, str):
                self.thread_names[(pid, tid)] = a["name"]   # torch may name a thread twice: the last one holds


def _whole(data, lo, hi):
    """The event object in ``data[lo:hi]`` (valid JSON to the scanner, hence to the parser; None if not)."""
    try:
        return loads(bytes(data[lo:hi]))
    except _BAD_JSON:
        return None

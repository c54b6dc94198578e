"""Kineto events gathered into numpy columns, one pass over the parsed objects of each piece.

Only complete events (``ph`` X) become rows; process and thread names are kept from the metadata;
flows, instants and counters are not used. The few events the collectives need (NCCL kernels,
``record_param_comms``, ``<backend>:<op>`` annotations, ``ProfilerStep#N``) are also kept whole.
"""
from __future__ import annotations

import numpy as np

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")
# older Kineto (torch 1.8-1.10) spelled some categories differently
_CAT_ALIASES = {"Kernel": "kernel", "Memcpy": "gpu_memcpy", "Memset": "gpu_memset", "Runtime": "cuda_runtime",
                "Operator": "cpu_op", "user_annotation": "user_annotation"}
_SPECIAL = ("nccl", "gloo", "mpi:", "ucc:", "record_param_comms", "ProfilerStep")
_NUM = (int, float)
MAX_US = 1e17   # beyond this a time is damage (epoch µs today are ~1.8e15)


class Events:
    """Columns of one rank's X events plus the metadata and the events kept whole."""

    def __init__(self):
        self.ts: list = []
        self.dur: list = []
        self.name: list = []      # codes into self.names
        self.cat: list = []       # codes into self.cats
        self.thread: list = []    # codes into self.threads ((pid, tid) keys)
        self.corr: list = []      # args.correlation, -1 when none
        self.stream: list = []    # args.stream (GPU events), -1 otherwise
        self.nbytes: list = []    # args.bytes (memcpy / memset), -1 otherwise
        self.names: dict = {}
        self.cats: dict = {}
        self.threads: dict = {}   # (pid, tid) -> code; GPU annotations (pid, tid, "annotations")
        self.special: list = []   # (row, event) of the events the collectives and steps need
        self.process_labels: dict = {}   # pid -> "CPU" | "GPU 0" ...
        self.process_names: dict = {}
        self.thread_names: dict = {}     # (pid, tid) -> name
        self.bad: dict = {}              # why -> events left out

    def feed(self, events: list) -> None:
        """Add one piece's event objects."""
        names, cats, threads = self.names, self.cats, self.threads
        ts_l, dur_l, name_l, cat_l, th_l = self.ts, self.dur, self.name, self.cat, self.thread
        corr_l, stream_l, bytes_l, special = self.corr, self.stream, self.nbytes, self.special
        for e in events:
            ph = e.get("ph")
            if ph != "X":
                if ph == "M":
                    self._meta(e)
                elif ph.__class__ is not str:
                    self._bad("event without a string 'ph'")
                continue
            name, ts, dur = e.get("name"), e.get("ts"), e.get("dur", 0)
            if name.__class__ is not str:
                self._bad("event without a string 'name'")
                continue
            if ts.__class__ not in _NUM or dur.__class__ not in _NUM or not -MAX_US < ts < MAX_US \
                    or not -MAX_US < dur < MAX_US:
                self._bad("'ts' or 'dur' is not a time in µs")
                continue
            pid, tid = e.get("pid"), e.get("tid")
            if pid.__class__ not in (int, str) or tid.__class__ not in (int, str):
                self._bad("'pid' or 'tid' is not an integer or a string")
                continue
            cat = e.get("cat")
            if cat.__class__ is not str:
                cat = ""
            else:
                cat = _CAT_ALIASES.get(cat, cat)
            a = e.get("args")
            if a.__class__ is not dict:
                a = {}
            c = names.get(name)
            if c is None:
                c = names[name] = len(names)
            name_l.append(c)
            c = cats.get(cat)
            if c is None:
                c = cats[cat] = len(cats)
            cat_l.append(c)
            key = (pid, tid, "annotations") if cat == "gpu_user_annotation" else (pid, tid)
            c = threads.get(key)
            if c is None:
                c = threads[key] = len(threads)
            th_l.append(c)
            ts_l.append(ts)
            dur_l.append(dur)
            v = a.get("correlation", -1)
            corr_l.append(v if v.__class__ is int and 0 <= v < 1 << 62 else -1)
            if cat in GPU_CATS:
                v = a.get("stream", tid)
                stream_l.append(v if v.__class__ is int and 0 <= v < 1 << 62 else -1)
                v = a.get("bytes", -1)
                bytes_l.append(v if v.__class__ is int and 0 <= v < 1 << 62 else -1)
            else:
                stream_l.append(-1)
                bytes_l.append(-1)
            if name.startswith(_SPECIAL):
                special.append((len(ts_l) - 1, e))

    def _bad(self, why: str) -> None:
        self.bad[why] = self.bad.get(why, 0) + 1

    def _meta(self, e: dict) -> None:
        a = e.get("args")
        if a.__class__ is not dict:
            return
        pid, name = e.get("pid"), e.get("name")
        if pid.__class__ not in (int, str):
            return
        if name == "process_labels" and a.get("labels").__class__ is str:
            self.process_labels[pid] = a["labels"]
        elif name == "process_name" and a.get("name").__class__ is str:
            self.process_names[pid] = a["name"]
        elif name == "thread_name" and a.get("name").__class__ is str and e.get("tid").__class__ in (int, str):
            self.thread_names[(pid, e["tid"])] = a["name"]

    def arrays(self) -> dict:
        """The columns as numpy arrays (the lists are let go)."""
        out = {
            "ts": np.asarray(self.ts, dtype="float64"), "dur": np.asarray(self.dur, dtype="float64"),
            "name": np.asarray(self.name, dtype="int32"), "cat": np.asarray(self.cat, dtype="int32"),
            "thread": np.asarray(self.thread, dtype="int32"), "corr": np.asarray(self.corr, dtype="int64"),
            "stream": np.asarray(self.stream, dtype="int64"), "bytes": np.asarray(self.nbytes, dtype="int64"),
        }
        self.ts = self.dur = self.name = self.cat = self.thread = self.corr = self.stream = self.nbytes = []
        return out

"""One Kineto (torch.profiler) trace into the schema's tables: one rank, local times in ns (docs/KINETO.md)."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from viewer import frames
from viewer.errors import TraceError, warn_damage
from viewer.io.columns import categories, int_na, lookup, lut
from viewer.io.ranges import INT32, MAX_EPOCH_NS, MAX_SPREAD_US, int_below
from viewer.kineto.comms import collectives
from viewer.kineto.events import FIELDS, GPU_CATS, Events, KinetoReader

FORMAT = "kineto"
_STEP = re.compile(r"ProfilerStep\s*#\s*(\d+)")
_FILE_RANK = re.compile(r"(?:^|[^a-z])(?:rank|worker)[-_]?(\d+)", re.I)
_EPOCH_US = 9.4e14   # ts beyond this (year 2000 in µs) is already wall-clock time
_TORCH_THREAD = re.compile(r"thread -?\d+ \((.+)\)")   # torch.profiler's thread_name: "thread 1102 (pt_main_thread)"


def rank_from_name(path) -> int | None:
    """The rank a file name gives (``rank3.123.pt.trace.json``, ``worker3...``, ``rank-3.json.gz``)."""
    m = _FILE_RANK.search(Path(path).name.split(".")[0])
    return int(m.group(1)) if m and int(m.group(1)) < INT32 else None


def parse_file(path, warn: bool = True) -> dict:
    """Per-file tables of one Kineto trace (local times in ns since its first event)."""
    reader = KinetoReader(path)
    ev = Events(reader.scan(FIELDS), reader.data)
    reader.data = bytearray()   # every event is in columns now: let the text go before the tables
    for why, n in ev.bad.items():   # the reader knows no line here: one entry per reason
        reader.skipped.append({"line": None, "byte": None, "reason": why, "events": n})
    cols = ev.cols
    if not len(cols["ts"]):
        raise TraceError(path, "no trace events" + (f" ({sum(x['events'] for x in reader.skipped)} unusable "
                                                    "event(s) skipped)" if reader.skipped else ""))
    hdr = reader.header
    info = hdr.get("distributedInfo") if isinstance(hdr.get("distributedInfo"), dict) else {}
    rank = int_below(info.get("rank"), INT32)
    if rank is None:
        rank = rank_from_name(path) or 0
    world, backend = int_below(info.get("world_size"), INT32), info.get("backend")
    backend = backend if isinstance(backend, str) else None
    _drop_far(cols, ev, reader)
    t0 = float(np.floor(cols["ts"].min()))   # whole µs: local times stay on the rank's own µs grid
    out, names = _tables(cols, ev, rank, t0, world, backend)
    base = _base_epoch_ns(hdr.get("baseTimeNanoseconds"), t0)
    closed = not reader.dropped
    last = int((out["events"]["t_ns"] + out["events"]["dur_ns"]).max())
    cpu_pids = [p for p, lab in ev.process_labels.items() if lab == "CPU" and int_below(p, 1 << 62) is not None]
    host = hdr.get("host_name") if isinstance(hdr.get("host_name"), str) else None
    out["rank_info"] = {
        "rank": rank, "host": host, "pid": cpu_pids[0] if cpu_pids else None, "local_rank": None,
        "size": world, "backend": backend, "base_epoch_ns": base, "clock_offset_ns": 0,
        "clock_offset_uncertainty_ns": None, "file": str(path), "format": FORMAT, "truncated": not closed,
        "events_dropped": None, "closed": closed, "events_skipped": sum(x["events"] for x in reader.skipped),
        "last_ts_ns": last,
    }
    # the CPU threads' names, by rank (the run's meta is one file's: viewer.kineto.attach gives each file all)
    out["meta"] = {"size": world or 1, "backend": backend, "format": FORMAT, "thread_names": {str(rank): names},
                   "_stop_offset": reader.stop_offset, "_size": reader.size, "_n_events": reader.n_events,
                   "_skipped": reader.skipped, "_damage": reader.damage, "_last_local_ns": last}
    if warn:
        warn_damage(path, out["meta"], closed)
    return out


def _drop_far(cols: dict, ev: Events, reader) -> None:
    """Leave out (and report) events more than ``MAX_SPREAD_US`` from the trace's median, or longer."""
    far = (np.abs(cols["ts"] - np.median(cols["ts"])) > MAX_SPREAD_US) | (np.abs(cols["dur"]) > MAX_SPREAD_US)
    n = int(far.sum())
    if not n:
        return
    keep = ~far
    new_row = np.cumsum(keep) - 1
    for k in list(cols):
        cols[k] = cols[k][keep]
    ev.special = [(int(new_row[r]), e) for r, e in ev.special if keep[r]]
    reader.skipped.append({"line": None, "byte": None, "reason": "'ts' or 'dur' more than 11 days away from "
                           "the trace's other events", "events": n})


def _base_epoch_ns(base_ns, t0_us: float) -> int | None:
    whole = int(t0_us // 1)   # integer arithmetic: epoch ns are beyond a double's exact integers
    t0_ns = whole * 1000 + int(round((t0_us - whole) * 1000))
    if int_below(base_ns, MAX_EPOCH_NS) is not None:
        return int(base_ns) + t0_ns
    return t0_ns if t0_us > _EPOCH_US else None


def _tables(cols: dict, ev: Events, rank: int, t0: float, world, backend) -> dict:
    n = len(cols["ts"])
    t_ns = np.rint((cols["ts"] - t0) * 1000).astype("int64")
    dur_ns = np.rint(cols["dur"] * 1000).astype("int64")
    cat_values = list(ev.cats)
    gpu_lut = lut(cat_values, lambda c: c in GPU_CATS)
    gpu_cat = gpu_lut[cols["cat"]]
    launcher = launch_rows(cols["corr"], gpu_cat)
    launch_ns = np.where(launcher >= 0, t_ns[np.maximum(launcher, 0)], 0)
    step = _steps(ev, cols, t_ns, dur_ns, gpu_cat, launcher)
    th_codes, th_values, names = _thread_labels(ev, cols, cat_values, gpu_lut)
    depth = _depth(th_codes, t_ns, dur_ns)
    thread_of = list(ev.threads)
    comms = collectives(cols, ev.special, lambda r: thread_of[cols["thread"][r]], launcher, world, backend)
    response = np.full(n, -1, dtype="int64")
    nbytes = cols["bytes"].copy()
    for k, c in enumerate(comms):
        response[c["row"]] = k
        nbytes[c["row"]] = -1 if c["bytes"] is None else c["bytes"]
    events = frames.conform("events", pd.DataFrame({
        "rank": np.full(n, rank, dtype="int32"),
        "thread": categories([(th_codes, th_values)]),
        "name": categories([(cols["name"], list(ev.names))]),
        "cat": categories([(cols["cat"], cat_values)]),
        "ph": categories([(np.zeros(n, dtype="int32"), ["X"])]),
        "t_ns": t_ns, "dur_ns": dur_ns, "tensor": categories([(np.full(n, -1, dtype="int32"), [])]),
        "step": step, "response": response, "bytes": int_na(nbytes, nbytes >= 0),
        "value": np.full(n, np.nan), "depth": depth,
        "launch_ns": int_na(launch_ns, gpu_cat & (launcher >= 0)),
    }, copy=False))
    fused, ops = _comm_tables(comms, rank, t_ns, dur_ns, step, world)
    return {"events": events, "fused_ops": fused, "tensor_ops": ops,
            "readiness": frames.empty("readiness"), "cycles": frames.empty("cycles")}, names


def launch_rows(corr, gpu):
    """For each GPU row, the CPU row with its correlation id (-1 when none)."""
    out = np.full(len(corr), -1, dtype="int64")
    cpu, g = np.flatnonzero(~gpu & (corr >= 0)), np.flatnonzero(gpu & (corr >= 0))
    at = lookup(corr[cpu], corr[g])
    out[g[at >= 0]] = cpu[at[at >= 0]]
    return out


def _steps(ev: Events, cols, t_ns, dur_ns, gpu, launcher):
    """ProfilerStep#N around each CPU event (start within it); GPU events take their launcher's."""
    spans = sorted((int(t_ns[r]), int(t_ns[r] + dur_ns[r]), int(m.group(1))) for r, e in ev.special
                   if (m := _STEP.match(e.get("name", ""))) and not gpu[r] and int(m.group(1)) < INT32)
    if not spans:
        return np.full(len(t_ns), -1, dtype="int64")
    starts, ends, nums = (np.array(x, dtype="int64") for x in zip(*spans))
    i = np.searchsorted(starts, t_ns, side="right") - 1
    inside = (i >= 0) & (t_ns < ends[np.maximum(i, 0)])
    step = np.where(inside, nums[np.maximum(i, 0)], -1)
    has = gpu & (launcher >= 0)
    step[has] = step[launcher[has]]
    return step


def _thread_labels(ev: Events, cols, cat_values, gpu_cat):
    """(codes per row, labels, {cpu label: the thread's name}) for the lanes: cpu:<tid>, gpu:<stream>,
    gpu:<stream>:annotations; a name as the trace's thread_name gives it, torch's "thread <tid> (" and ")" cut."""
    keys = list(ev.threads)
    labels: dict = {}
    names: dict = {}
    codes = np.empty(len(keys), dtype="int32")
    # a thread key is GPU when its rows are GPU events: look at the first row of each
    first = np.full(len(keys), -1, dtype="int64")
    th = cols["thread"]
    first[th[::-1]] = np.arange(len(th))[::-1]
    gpu_pids = {keys[k][0] for k in range(len(keys)) if first[k] >= 0 and gpu_cat[cols["cat"][first[k]]]}
    for k, (pid, tid, *_) in enumerate(keys):
        r = first[k]
        cat = cat_values[cols["cat"][r]] if r >= 0 else ""
        if cat in GPU_CATS:
            stream = cols["stream"][r] if cols["stream"][r] >= 0 else tid
            dev = "" if len(gpu_pids) <= 1 else str(pid)
            label = f"gpu{dev}:{stream}" + (":annotations" if cat == "gpu_user_annotation" else "")
        elif pid == "Spans" or cat == "Trace":
            label = "profiler"
        else:
            label = f"cpu:{tid}"
            if (name := ev.thread_names.get((pid, tid), "").strip()):
                names[label] = m[1] if (m := _TORCH_THREAD.fullmatch(name)) else name
        codes[k] = labels.setdefault(label, len(labels))
    return codes[th], list(labels), names


def _depth(threads, t_ns, dur_ns):
    """Nesting depth of each span on its lane (ties: the longer one outside)."""
    n = len(t_ns)
    depth = np.zeros(n, dtype="int32")
    end = t_ns + dur_ns
    order = np.lexsort((-dur_ns, t_ns, threads))
    th_sorted = threads[order]
    bounds = np.flatnonzero(np.diff(th_sorted)) + 1
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, n]):
        idx = order[lo:hi]
        ends = np.sort(end[idx])
        started = np.arange(1, len(idx) + 1)
        ended = np.searchsorted(ends, t_ns[idx], side="right")
        depth[idx] = np.maximum(started - ended - 1, 0)
    return depth


def _comm_tables(comms: list, rank: int, t_ns, dur_ns, step, world):
    """fused_ops and tensor_ops rows of the rank's collectives (columns left out: the schema's default)."""
    seen: dict = {}
    keys = []
    for c in comms:
        key = (c["pg"] or "0", int(step[c["row"]]))
        seen[key] = seen.get(key, -1) + 1
        keys.append(f"{(c['op'] or 'collective').lower()}/pg{key[0]}#{seen[key]}")
    rows = np.array([c["row"] for c in comms], dtype="int64")
    submit = t_ns[[c["row"] if c["launch_row"] is None else c["launch_row"] for c in comms]].tolist()
    start, end, steps = t_ns[rows].tolist(), (t_ns + dur_ns)[rows].tolist(), step[rows].tolist()
    same = {k: [c[k] for c in comms] for k in ("op", "dtype")}
    m = len(comms)
    fused = frames.build("fused_ops", {
        "rank": [rank] * m, "response": list(range(m)), "step": steps, **same,
        "backend": [c["backend"] for c in comms], "activity": [c["activity"] for c in comms],
        "count": [1] * m, "bytes": [c["bytes"] or 0 for c in comms], "start_ns": start, "end_ns": end,
        "comm_ns": [e - s for s, e in zip(start, end)], "size": [c["size"] or world or 1 for c in comms],
        "tensors": [[k] for k in keys]})
    ops = frames.build("tensor_ops", {
        "rank": [rank] * m, "tensor": keys, "step": steps, **same, "bytes": [c["bytes"] for c in comms],
        "process_set": [_pg_int(c["pg"]) for c in comms], "response": list(range(m)), "submit_ns": submit,
        "negotiated_ns": start, "start_ns": start, "done_ns": end, "end_ns": end})
    return fused, ops


def _pg_int(pg) -> int:
    try:
        return int(pg) if 0 <= int(pg) < INT32 else 0
    except (TypeError, ValueError):
        return 0

"""``ringscope merge`` for runs with Kineto traces: one Chrome trace from the loaded tables, a process per rank."""
from __future__ import annotations

from pathlib import Path

import orjson

from viewer.merge import _LANE_TID, MERGED_KEY, _relane, _thread


def _lane_order(label: str):
    kind, _, rest = label.partition(":")
    num = rest.split(":")[0]
    return (0 if kind == "cpu" else 2 if kind == "profiler" else 1, int(num) if num.lstrip("-").isdigit() else 0,
            label)


def write_merged(tables, out) -> dict:
    """Write ``out`` (object form, one event per line); returns ``{events, ranks, overlap_lanes}``."""
    ev = tables.events
    header = {MERGED_KEY: {"origin_epoch_ns": tables.meta.get("origin_epoch_ns"), "format": "kineto",
                           "ranks": [{"rank": int(r), "file": f, "clock_offset_ns": None if o is None else int(o)}
                                     for r, f, o in zip(tables.ranks["rank"], tables.ranks["file"],
                                                        tables.ranks["clock_offset_ns"].astype("object")
                                                        .where(tables.ranks["clock_offset_ns"].notna(), None))]}}
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    n, lanes_all = 0, 0
    with open(out, "wb") as fh:
        fh.write(b'{"displayTimeUnit": "ms", "otherData": ' + orjson.dumps(header) + b',\n"traceEvents": [\n')
        first = True
        for rank, g in ev.groupby("rank", sort=True):
            rank = int(rank)
            labels = sorted(g["thread"].dropna().unique().tolist(), key=_lane_order)
            tid = {lab: k + 1 for k, lab in enumerate(labels)}
            host = tables.ranks.loc[tables.ranks["rank"] == rank, "host"]
            name = f"rank {rank}" + (f" ({host.iloc[0]})" if len(host) and isinstance(host.iloc[0], str) else "")
            meta = [{"ph": "M", "name": "process_name", "pid": rank, "args": {"name": name}},
                    {"ph": "M", "name": "process_sort_index", "pid": rank, "args": {"sort_index": rank}}]
            events = []
            nbytes = g["bytes"].astype("object").where(g["bytes"].notna(), None)
            for th, nm, cat, t, d, step, b in zip(g["thread"], g["name"], g["cat"], g["t_ns"], g["dur_ns"],
                                                  g["step"], nbytes):
                args = {"step": int(step)} if step >= 0 else {}
                if b is not None:
                    args["bytes"] = int(b)
                events.append({"ph": "X", "name": nm, "cat": cat, "pid": rank, "tid": tid.get(th, 0),
                               "ts": round(t / 1000.0, 3), "dur": round(d / 1000.0, 3), "args": args})
            lanes = _relane(events)
            lanes_all += len(lanes)
            for lab, k in tid.items():
                meta += _thread(rank, k, lab)
            for _, t, k in sorted(lanes, key=lambda x: (x[1], x[2])):
                meta.append({"ph": "M", "name": "thread_name", "pid": rank, "tid": t + k * _LANE_TID,
                             "args": {"name": f"{labels[t - 1]} (overlap {k})"}})
            for e in meta + events:
                fh.write((b"" if first else b",\n") + orjson.dumps(e))
                first = False
            n += len(events)
        fh.write(b"\n]}\n")
    return {"events": n, "ranks": int(ev["rank"].nunique()), "overlap_lanes": lanes_all}

"""The collectives of one Kineto rank: what ran, on how many bytes, in which process group (docs/KINETO.md)."""
from __future__ import annotations

import bisect
import math
import re

from viewer.io.ranges import INT32, MAX_BYTES, int_below
from viewer.vocab import DTYPE_BYTES

COMM_KERNEL = re.compile(r"^nccl.*Kernel")
_ANNOTATION = re.compile(r"^(nccl|gloo|mpi|ucc|xccl):([A-Za-z_]+)")
_KERNEL_OP = re.compile(r"^nccl(?:Dev)?Kernel_([A-Za-z]+)|^nccl([A-Z][A-Za-z]+?)(?:Ring|Tree|Kernel)")
# torch's dtype spellings (record_param_comms' ``dtype``, the profiler's ``Input type``) besides numpy's names
_DTYPE_ALIASES = {"float": "float32", "double": "float64", "half": "float16", "c10::half": "float16",
                  "c10::bfloat16": "bfloat16", "int": "int32", "long": "int64", "long int": "int64",
                  "short": "int16", "short int": "int16", "byte": "uint8", "unsigned char": "uint8", "char": "int8",
                  "signed char": "int8"}
_DTYPE_BYTES = {**DTYPE_BYTES, "float8_e4m3fn": 1, "float8_e5m2": 1}
_OPS = (("allreduce", "ALLREDUCE"), ("allgather", "ALLGATHER"), ("reducescatter", "REDUCESCATTER"),
        ("alltoall", "ALLTOALL"), ("broadcast", "BROADCAST"), ("sendrecv", "SENDRECV"), ("barrier", "BARRIER"),
        ("reduce", "REDUCE"), ("gather", "GATHER"), ("scatter", "SCATTER"), ("send", "SEND"), ("recv", "RECV"))


def op_name(raw) -> str | None:
    """``all_reduce``, ``allreduce``, ``AllReduce``, ``_reduce_scatter_base`` ... -> ALLREDUCE, ..."""
    if raw.__class__ is not str:
        return None
    s = raw.lower().replace("_", "")
    for prefix, op in _OPS:
        if s.startswith(prefix):
            return op
    return s.upper() or None


def dtype_info(raw):
    """(numpy dtype name, element bytes) of a torch dtype spelling, or (None, None)."""
    name = _DTYPE_ALIASES.get(raw.lower(), raw.lower()) if raw.__class__ is str else None
    return (name, _DTYPE_BYTES[name]) if name in _DTYPE_BYTES else (None, None)


def _ranks(v):
    """``Process Group Ranks`` ('[0, 1]' or a list) -> its length, or None."""
    if v.__class__ is list:
        return len(v) or None
    if v.__class__ is str and v.startswith("["):
        inner = v.strip("[] ")
        return len(inner.split(",")) if inner else None
    return None


def describe(args: dict, world: int | None) -> dict:
    """op, dtype, bytes (per rank), size and pg of ``record_param_comms``-style args (None: missing)."""
    op = op_name(args.get("Collective name"))
    dtype, esize = dtype_info(args.get("dtype"))
    n_in, n_out = int_below(args.get("In msg nelems"), MAX_BYTES), int_below(args.get("Out msg nelems"), MAX_BYTES)
    size = int_below(args.get("Group size"), INT32) or _ranks(args.get("Process Group Ranks")) or world
    pg = args.get("Process Group Name", args.get("Process Group ID"))
    nbytes = None
    if esize and n_in is not None:
        if op == "REDUCESCATTER" and n_out is not None:
            nbytes = n_out * esize           # op_bandwidth multiplies gathered ops by n
        elif op == "ALLTOALL" and size:
            nbytes = n_in * esize // size
        else:
            nbytes = n_in * esize
    return {"op": op, "dtype": dtype, "bytes": nbytes if nbytes is None or nbytes < MAX_BYTES else None, "size": size,
            "pg": None if pg is None else str(pg)}


def _from_annotation(args: dict) -> tuple:
    """(dtype, bytes) from a profiled op's ``Input Dims`` and ``Input type`` (first tensor)."""
    dims, types = args.get("Input Dims"), args.get("Input type")
    if dims.__class__ is not list or types.__class__ is not list or not dims or not types:
        return None, None
    dtype, esize = dtype_info(types[0])
    shape = dims[0]
    if esize is None or shape.__class__ is not list or not all(int_below(x, MAX_BYTES) is not None for x in shape):
        return dtype, None
    n = esize * math.prod(shape)
    return dtype, n if n < MAX_BYTES else None


def _kernel_op(name: str) -> str | None:
    m = _KERNEL_OP.match(name)
    if not m:
        return None
    raw = m.group(1) or m.group(2)
    return None if raw in ("Generic",) else op_name(raw)


def collectives(cols: dict, special: list, thread_of, launcher, world: int | None,
                backend: str | None) -> list[dict]:
    """One dict per collective in start order: ``row`` (its event), ``launch_row`` (the CPU event that
    submitted it, or None), op, dtype, bytes, size, pg, backend, activity. ``special``: (row, event) kept
    whole; ``thread_of(row)``: its (pid, tid); ``launcher``: each GPU row's launch call row (-1: none)."""
    rpc_by_thread = _by_thread(cols, special, thread_of, lambda e: e.get("name") == "record_param_comms")
    ann_by_thread = _by_thread(cols, special, thread_of, lambda e: _ANNOTATION.match(e.get("name", ""))
                               and e.get("cat") in ("user_annotation", "cpu_op"))
    kernels = [(r, e) for r, e in special if e.get("cat") in ("kernel", "Kernel") and COMM_KERNEL.match(e["name"])]
    out = []
    for r, e in kernels:
        a = e.get("args") if e.get("args").__class__ is dict else {}
        info = describe(a, world)
        lr = int(launcher[r]) if launcher[r] >= 0 else None
        rp = None if lr is None else _enclosing(rpc_by_thread.get(thread_of(lr), ()), cols["ts"][lr])
        if rp is not None:
            ra = rp[3].get("args") if rp[3].get("args").__class__ is dict else {}
            more = describe(ra, world)
            info = {k: info[k] if info[k] is not None else more[k] for k in info}
        ann = None if lr is None else _enclosing(ann_by_thread.get(thread_of(lr), ()), cols["ts"][lr])
        if info["op"] is None and ann is not None:
            info["op"] = op_name(_ANNOTATION.match(ann[3]["name"]).group(2))
        if info["op"] is None:
            info["op"] = _kernel_op(e["name"])
        if info["pg"] is None:   # NCCL runs each communicator on its own stream
            info["pg"] = f"s{cols['stream'][r]}"
        first = rp or ann
        out.append(dict(info, row=r, launch_row=lr if first is None else first[2], backend=backend or "nccl",
                        activity=e["name"].split("(")[0]))
    if not kernels:
        for r, e in special:
            m = _ANNOTATION.match(e.get("name", ""))
            if not m or e.get("cat") not in ("user_annotation", "cpu_op", "gpu_user_annotation"):
                continue
            a = e.get("args") if e.get("args").__class__ is dict else {}
            info = describe(a, world)
            dtype, nbytes = _from_annotation(a)
            info["op"] = info["op"] or op_name(m.group(2))
            info["dtype"] = info["dtype"] or dtype
            if info["bytes"] is None and nbytes is not None:
                info["bytes"] = nbytes // info["size"] if info["op"] == "ALLTOALL" and info["size"] else nbytes
            out.append(dict(info, row=r, launch_row=None, backend=m.group(1), activity=e["name"]))
    out.sort(key=lambda c: cols["ts"][c["row"]])
    return out


def _by_thread(cols: dict, special: list, thread_of, keep) -> dict:
    """``{thread: [(start, end, row, event)]}`` of the kept special events, sorted by start."""
    out: dict = {}
    for r, e in sorted(((r, e) for r, e in special if keep(e)), key=lambda x: cols["ts"][x[0]]):
        out.setdefault(thread_of(r), []).append((cols["ts"][r], cols["ts"][r] + cols["dur"][r], r, e))
    return out


def _enclosing(spans, t):
    """The last span ``(start, end, row, event)`` that starts at or before ``t`` and ends after it."""
    i = bisect.bisect_right(spans, (t, float("inf"))) - 1
    while i >= 0:
        s, e, _, _ = spans[i]
        if s <= t <= e:
            return spans[i]
        i -= 1
        if t - s > 60e6:   # a minute back: nothing encloses it
            break
    return None

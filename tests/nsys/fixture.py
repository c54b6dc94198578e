"""SYNTHETIC Nsight Systems exports built from a real ringscope run's own trace files.

There is no GPU and no nsys where ringscope is developed, so this writes SQLite files that follow the
``nsys export --type sqlite`` schema (3.28, table and column names as nsys writes them) but whose
content is made up from a ringscope trace:

* every span the tracer opens an NVTX range for becomes an NVTX start/end range in the ``ringscope``
  domain, named and categorised as ``tracer.timeline`` does (see ``names.ringscope_nvtx_message``;
  int64 payload = ``args.bytes``), at the moment the trace recorded it plus up to ``jitter_ns``;
  tensor lifecycle messages inline (``text``), the others through ``StringIds`` (``textId``);
* one NVTX mark ``ringscope rank=R size=N`` per process, in the ringscope domain;
* NCCL kernels inside each backend activity (one per ring sub-phase when it has them), launched by a
  ``cudaLaunchKernel`` on the backend thread inside the same phase; names alternate between current
  (``ncclDevKernel_*``) and old (``ncclKernel_*``) NCCL styles; a compute kernel on another stream
  before activities that have room for one;
* a known clock error: nsys's UTC disagrees with the rank's wall clock by ``clock_error_ns[rank]``,
  so session-start alignment alone is off by exactly that much.

Nothing here comes from a real GPU. :func:`build` returns the truth the tests check against.
"""
from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from tracer import vocab
from viewer.nsys import reader as C
from viewer.nsys.mapping import ringscope_nvtx_message


def global_tid(pid: int, tid: int) -> int:
    """(pid, tid) serialized as nsys's globalTid/globalPid (vm 0)."""
    return ((int(pid) & 0xFFFFFF) << 24) | (int(tid) & 0xFFFFFF)


SCHEMA_VERSION = "3.28.1"
NCCL_STREAM = 13
COMPUTE_STREAM = 7
DEVICE = 0

DDL = """
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE META_DATA_EXPORT (name TEXT NOT NULL, value TEXT);
CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT,
    systemClockNs INTEGER, sessionStartCntVctNs INTEGER);
CREATE TABLE PROCESSES (globalPid INTEGER, pid INTEGER, name TEXT);
CREATE TABLE ThreadNames (nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
    rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER,
    endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, uint64Value INTEGER, int64Value INTEGER,
    doubleValue REAL, uint32Value INTEGER, int32Value INTEGER, floatValue REAL, jsonTextId INTEGER,
    jsonText TEXT);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL,
    eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL,
    returnValue INTEGER NOT NULL, callchainId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL,
    deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER,
    streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
    demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER,
    launchType INTEGER, cacheConfig INTEGER, registersPerThread INTEGER NOT NULL,
    gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL,
    blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL,
    staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL,
    localMemoryPerThread INTEGER NOT NULL, localMemoryTotal INTEGER NOT NULL,
    gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER, graphNodeId INTEGER,
    sharedMemoryLimitConfig INTEGER, qmdBulkReleaseDone INTEGER, qmdPreexitDone INTEGER,
    qmdLastCtaDone INTEGER, graphId INTEGER, clusterX INTEGER, clusterY INTEGER, clusterZ INTEGER,
    clusterSchedulingPolicy INTEGER, maxPotentialClusterSize INTEGER, maxActiveClusters INTEGER,
    sharedMemoryRequestedPercentage INTEGER, tensorSizeMinusOneElements TEXT NOT NULL);
"""

_NCCL_OP = {"ALLREDUCE": "AllReduce", "REDUCE_SCATTER": "ReduceScatter", "REDUCESCATTER": "ReduceScatter",
            "ALLGATHER": "AllGather", "BCAST": "Broadcast", "BROADCAST": "Broadcast",
            "ALLTOALL": "SendRecv", "BARRIER": "AllReduce"}
_NEW_DT = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "int32": "i32",
           "int64": "i64", "uint8": "u8", "int8": "i8"}
_OLD_DT = {"float32": "float", "float16": "half", "bfloat16": "__nv_bfloat16", "float64": "double",
           "int32": "int32_t", "int64": "int64_t", "uint8": "uint8_t", "int8": "int8_t"}
COMPUTE_KERNEL = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctorOnSelf_add"
                  "<float>, std::array<char*, 2ul>>(int, at::native::CUDAFunctorOnSelf_add<float>, "
                  "std::array<char*, 2ul>)")


def nccl_kernel_name(activity: str, dtype: str, style: str) -> tuple[str, str]:
    """(demangled, short) name of the NCCL kernel for a backend activity, in ``new`` or ``old`` style."""
    op = next((v for k, v in _NCCL_OP.items() if activity.endswith(k)), "AllReduce")
    if style == "new":
        if op == "SendRecv":
            short = "ncclDevKernel_SendRecv"
        else:
            short = f"ncclDevKernel_{op}_Sum_{_NEW_DT.get(dtype, 'f32')}_RING_LL"
        return f"{short}(ncclDevKernelArgsStorage<4096ul>)", short
    short = f"ncclKernel_{op}_RING_LL_Sum_{_OLD_DT.get(dtype, 'float')}"
    return f"{short}(ncclWorkElem)", short


@dataclass
class PlacedKernel:
    rank: int
    response: int
    phase: str              # the trace span it was placed in
    name: str
    nccl: bool
    wall_start_ns: int      # in the rank's wall clock
    wall_end_ns: int


@dataclass
class FixtureTruth:
    files: dict = field(default_factory=dict)           # rank -> sqlite path
    pids: dict = field(default_factory=dict)            # rank -> pid written
    clock_error_ns: dict = field(default_factory=dict)  # rank -> nsys UTC minus rank wall clock
    kernels: list = field(default_factory=list)         # PlacedKernel
    nvtx_ranges: dict = field(default_factory=dict)     # rank -> count


def read_trace(path) -> tuple[dict, list[dict]]:
    """(run metadata, events) of one ringscope per-rank trace (a cut-off tail is tolerated)."""
    text = Path(path).read_text()
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        body = text[:text.rfind("}") + 1].rstrip().rstrip(",")
        doc = json.loads(body + "\n]}")
    return doc["otherData"][vocab.VERSION_KEY], doc["traceEvents"]


class _Writer:
    def __init__(self, path: Path):
        if path.exists():
            path.unlink()
        self.con = sqlite3.connect(path)
        self.con.executescript(DDL)
        self.strings: dict[str, int] = {}
        self.corr = 0

    def sid(self, s: str) -> int:
        if s not in self.strings:
            self.strings[s] = len(self.strings) + 1
            self.con.execute("insert into StringIds values (?, ?)", (self.strings[s], s))
        return self.strings[s]

    def nvtx(self, start, end, etype, gtid, text=None, text_id=None, domain=None, category=None,
             payload=None, end_gtid=None):
        self.con.execute(
            "insert into NVTX_EVENTS (start, end, eventType, category, text, globalTid, endGlobalTid,"
            " textId, domainId, int64Value) values (?,?,?,?,?,?,?,?,?,?)",
            (start, end, etype, category, text, gtid, end_gtid, text_id, domain, payload))

    def kernel(self, start, end, stream, gpid, name, short):
        self.corr += 1
        self.con.execute(
            "insert into CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId,"
            " correlationId, globalPid, demangledName, shortName, registersPerThread, gridX, gridY,"
            " gridZ, blockX, blockY, blockZ, staticSharedMemory, dynamicSharedMemory,"
            " localMemoryPerThread, localMemoryTotal, gridId, tensorSizeMinusOneElements)"
            " values (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (start, end, DEVICE, 1, stream, self.corr, gpid, self.sid(name), self.sid(short), 96,
             2, 1, 1, 640, 1, 1, 0, 0, 0, 0, self.corr, "[]"))
        return self.corr

    def launch(self, start, end, gtid, corr):
        self.con.execute("insert into CUPTI_ACTIVITY_KIND_RUNTIME values (?,?,?,?,?,?,?,?)",
                         (start, end, 0, gtid, corr, self.sid("cudaLaunchKernel_v7000"), 0, None))

    def close(self, session_epoch_ns):
        import datetime as dt

        utc = dt.datetime.fromtimestamp(session_epoch_ns / 1e9, dt.timezone.utc)
        self.con.execute("insert into TARGET_INFO_SESSION_START_TIME values (?,?,?,?,?)",
                         (session_epoch_ns, utc.isoformat(), utc.isoformat(), 0, None))
        self.con.executemany("insert into META_DATA_EXPORT values (?, ?)",
                             [("EXPORT_SCHEMA_VERSION", SCHEMA_VERSION),
                              ("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems (ringscope synthetic fixture)")])
        self.con.commit()
        self.con.close()


def _is_lifecycle(e) -> bool:
    """A format-3 tensor lifecycle event (X, B or E on the tensor's own thread)."""
    return e.get("cat") == vocab.CAT_TENSOR and e.get("ph") in ("X", "B", "E")


def _backend_targets(events):
    """[(activity event, [spans to put kernels in])] for the backend thread's comm activities."""
    back = sorted((e for e in events if e.get("ph") == "X" and e.get("tid") == vocab.TID_BACKEND),
                  key=lambda e: e["ts"])
    acts = [e for e in back if e["name"] in vocab.COMM_ACTIVITIES]
    subs = [e for e in back if e["name"] in vocab.RING_SUBPHASES]
    out = []
    for a in acts:
        a0, a1 = a["ts"], a["ts"] + a["dur"]
        inner = [s for s in subs if s["ts"] >= a0 - 1e-3 and s["ts"] + s["dur"] <= a1 + 1e-3]
        out.append((a, inner or [a]))
    return out


def _emit_rank(w: _Writer, meta, events, S: int, err: int, pid: int, jitter_ns: int, seed: int,
               mark_rank: bool, truth: FixtureTruth, style_counter: list):
    import random

    rng = random.Random(seed * 1000003 + int(meta.get("rank", 0)))
    w.corr = 0      # CUPTI correlation ids count per process: they collide in a multi-process report
    rank, base = int(meta["rank"]), int(meta["base_epoch_ns"])

    def n(ts_us, jitter=True):      # trace µs -> nsys session ns
        return base + round(ts_us * 1000) - S + err + (rng.randint(0, jitter_ns) if jitter else 0)

    gt = {tid: global_tid(pid, pid + tid) for tid in vocab.THREAD_NAMES}
    gpid = global_tid(pid, 0)
    w.con.execute("insert into PROCESSES values (?,?,?)", (gpid, pid, "python3"))
    for tid, tname in vocab.THREAD_NAMES.items():
        w.con.execute("insert into ThreadNames values (?,?,?)", (w.sid(f"ringscope-{tname}"), 0, gt[tid]))
    # (message, category, t0, t1, payload, thread) exactly as tracer.timeline names its ranges
    spans = []
    for e in events:
        if e.get("ph") == "X" and "dur" in e and not _is_lifecycle(e):
            a = e.get("args") or {}
            msg = ringscope_nvtx_message(e["name"], None, None, a.get(vocab.ARG_STEP))
            if msg is not None:
                spans.append((msg, e["name"], e["ts"], e["ts"] + e["dur"], a.get(vocab.ARG_BYTES),
                              gt.get(e.get("tid"), gt[vocab.TID_FRAMEWORK])))
    spans.sort(key=lambda s: s[2])
    if not spans:
        return
    first = n(spans[0][2], jitter=False)
    dom = 1
    w.nvtx(first - 1000, None, C.NVTX_DOMAIN_CREATE, gt[vocab.TID_FRAMEWORK], text=C.RINGSCOPE_DOMAIN,
           domain=dom)
    cats = {}
    for _, cat, *_ in spans:
        if cat not in cats:
            cats[cat] = len(cats) + 1
            w.nvtx(first - 900, None, C.NVTX_CATEGORY, gt[vocab.TID_FRAMEWORK], text=cat,
                   domain=dom, category=cats[cat])
    if mark_rank:
        w.nvtx(first - 500, None, C.NVTX_MARK, gt[vocab.TID_FRAMEWORK], domain=dom,
               text=f"ringscope rank={rank} size={meta.get('size')}")
    for i, (msg, cat, t0, t1, payload, g) in enumerate(spans):
        s, e = n(t0), n(t1)
        registered = i % 3 != 0      # some messages inline, most via StringIds: nsys writes both
        w.nvtx(s, max(s, e), C.NVTX_STARTEND, g, text=None if registered else msg,
               text_id=w.sid(msg) if registered else None, domain=dom, category=cats[cat],
               payload=payload if isinstance(payload, int) else None)
        if cat == vocab.STEP:   # an application's own range in the default domain
            w.nvtx(s, max(s, e), C.NVTX_PUSHPOP, gt[vocab.TID_FRAMEWORK], text_id=w.sid("train_step"))
    truth.nvtx_ranges[rank] = len(spans)

    dtypes = {(e.get("args") or {}).get(vocab.ARG_RESPONSE): (e.get("args") or {}).get(vocab.ARG_DTYPE)
              for e in events if e.get("name") == vocab.FUSED_RESPONSE}
    prev_end = None
    for act, targets in _backend_targets(events):
        resp = int((act.get("args") or {}).get(vocab.ARG_RESPONSE, -1))
        a0 = act["ts"]
        if prev_end is None or a0 - prev_end >= 300:       # room for a compute kernel before it
            ks, ke = n(a0 - 150, False), n(a0 - 50, False)
            corr = w.kernel(ks, ke, COMPUTE_STREAM, gpid, COMPUTE_KERNEL, "vectorized_elementwise_kernel")
            w.launch(n(a0 - 200, False), n(a0 - 195, False), gt[vocab.TID_FRAMEWORK], corr)
            truth.kernels.append(PlacedKernel(rank, -1, "", COMPUTE_KERNEL, False,
                                              base + round((a0 - 150) * 1000), base + round((a0 - 50) * 1000)))
        prev_end = a0 + act["dur"]
        for t in targets:
            t0, t1 = t["ts"], t["ts"] + t["dur"]
            d = t1 - t0
            style = "new" if style_counter[0] % 2 == 0 else "old"
            style_counter[0] += 1
            name, short = nccl_kernel_name(t["name"], dtypes.get(resp) or "float32", style)
            ks, ke = t0 + d / 4, t1 - d / 4
            corr = w.kernel(n(ks, False), n(ke, False), NCCL_STREAM, gpid, name, short)
            ls = t0 + d / 10
            w.launch(n(ls, False), n(ls + min(d / 20, 5.0), False), gt[vocab.TID_BACKEND], corr)
            truth.kernels.append(PlacedKernel(rank, resp, t["name"], name, True,
                                              base + round(ks * 1000), base + round(ke * 1000)))


def build(trace_files, out, *, clock_error_ns=None, jitter_ns: int = 800, combined: bool = False,
          mark_rank: bool = True, seed: int = 0) -> FixtureTruth:
    """Write synthetic nsys SQLite export(s) for the given ringscope trace files.

    ``out``: a directory (one ``report.rank<R>.sqlite`` per rank) or, with ``combined``, the path of
    one file holding every rank's process (as ``nsys profile mpiexec ...`` would). ``clock_error_ns``:
    {rank: ns} or one int for all (default: 1.234567 ms + rank x 0.333 ms; one file shares rank 0's).
    """
    loaded = [read_trace(f) for f in trace_files]
    loaded.sort(key=lambda mt: int(mt[0]["rank"]))
    truth = FixtureTruth()
    errs = {}
    for meta, _ in loaded:
        r = int(meta["rank"])
        if isinstance(clock_error_ns, dict):
            errs[r] = int(clock_error_ns[r])
        elif clock_error_ns is not None:
            errs[r] = int(clock_error_ns)
        else:
            errs[r] = 1_234_567 + 333_333 * r
    if combined:
        errs = {r: errs[min(errs)] for r in errs}
    out = Path(out)
    groups = [(out, loaded)] if combined else [(out / f"report.rank{int(m['rank'])}.sqlite", [(m, ev)])
                                               for m, ev in loaded]
    if not combined:
        out.mkdir(parents=True, exist_ok=True)
    style_counter = [0]
    for path, items in groups:
        first = min(int(m["base_epoch_ns"]) + round(min((e["ts"] for e in ev if "ts" in e), default=0) * 1000)
                    for m, ev in items)
        S = (first - 50_000_000) // 1000 * 1000
        w = _Writer(Path(path))
        for m, ev in items:
            r = int(m["rank"])
            pid = int(m.get("pid") or 40000 + r)
            truth.files[r], truth.pids[r], truth.clock_error_ns[r] = str(path), pid, errs[r]
            _emit_rank(w, m, ev, S, errs[r], pid, jitter_ns, seed, mark_rank, truth, style_counter)
        w.close(S)
    return truth

"""Read what the overlay needs from one ``nsys export --type sqlite`` file (times as nsys wrote them)."""
from __future__ import annotations

import sqlite3
import warnings
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from viewer.io.ranges import MAX_EPOCH_NS, MAX_NS
from viewer.nsys.errors import NsysError

# NVTX_EVENTS.eventType values (export schema 3.x)
NVTX_CATEGORY = 33       # nvtxDomainNameCategory: text = category name, category = its id
NVTX_MARK = 34
NVTX_PUSHPOP = 59        # push/pop range (same thread)
NVTX_STARTEND = 60       # start/end range (may end on another thread)
NVTX_DOMAIN_CREATE = 75  # text = domain name, domainId = its id
NVTX_RANGE_TYPES = (NVTX_PUSHPOP, NVTX_STARTEND)
RINGSCOPE_DOMAIN = "ringscope"
_REQUIRED = ("StringIds", "NVTX_EVENTS", "TARGET_INFO_SESSION_START_TIME")   # the rest is optional

NVTX_COLUMNS = {"start": "int64", "end": "Int64", "event_type": "int32", "name": "string", "domain": "string",
                "category": "string", "pid": "Int64", "payload": "Int64"}
KERNEL_COLUMNS = {"start": "int64", "end": "int64", "name": "string", "short_name": "string", "device": "Int64",
                  "stream": "Int64", "correlation": "Int64", "pid": "Int64",
                  "launch_tid": "Int64", "launch_start": "Int64", "launch_end": "Int64", "api": "string"}


@dataclass
class NsysReport:
    """One export's ``nvtx`` and ``kernels``; ``skipped``: rows with times no session can hold."""

    file: str
    schema_version: str | None
    session_start_epoch_ns: int
    nvtx: object          # DataFrame[NVTX_COLUMNS]
    kernels: object       # DataFrame[KERNEL_COLUMNS]
    skipped: int = 0


def _connect(path: Path) -> sqlite3.Connection:
    if not path.exists():
        raise NsysError(path, "no such file")
    if path.is_dir():
        raise NsysError(path, "is a directory, not an nsys SQLite export")
    with open(path, "rb") as fh:
        head = fh.read(16)
    if head != b"SQLite format 3\x00":
        hint = " (export it with: nsys export --type sqlite)" if path.suffix == ".nsys-rep" else ""
        raise NsysError(path, f"not an SQLite file{hint}")
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        con.execute("select count(*) from sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        raise NsysError(path, f"unreadable SQLite: {exc}") from None
    return con


def _columns(con, path, table: str, need: set) -> set[str]:
    cols = {r[1] for r in con.execute(f"pragma table_info({table})")}
    if need - cols:
        raise NsysError(path, f"table {table} lacks column(s) {', '.join(sorted(need - cols))}")
    return cols


def _timed(df, launch: bool = False):
    """``(rows, left out)``: rows with 0 <= start <= end <= MAX_NS (a mark has no end); a kernel whose
    launch call has other times loses the launch (NA), counted too."""
    ok = (df["start"] >= 0) & (df["start"] <= MAX_NS) & (df["end"].isna() | (df["end"] >= df["start"])
                                                         & (df["end"] <= MAX_NS))
    ok = ok.fillna(False).astype(bool)
    lost = int((~ok).sum())
    if launch:
        bad = df["launch_start"].notna() & ~((df["launch_start"] >= 0) & (df["launch_start"] <= df["launch_end"])
                                             & (df["launch_end"] <= MAX_NS)).fillna(False).astype(bool)
        df.loc[bad, ["launch_start", "launch_end", "launch_tid", "api"]] = pd.NA
        lost += int((bad & ok).sum())
    return df[ok].reset_index(drop=True), lost


def _pid(global_tid) -> int:
    """The OS process id inside a serialized globalTid/globalPid."""
    return (int(global_tid) >> 24) & 0xFFFFFF


def _read_nvtx(con, path):
    cols = _columns(con, path, "NVTX_EVENTS", {"start", "end", "eventType", "text", "globalTid"})
    opt = {c: (f"e.{c}" if c in cols else "NULL") for c in
           ("textId", "domainId", "category", "int64Value", "uint64Value", "int32Value", "uint32Value")}
    sql = f"""
        select e.start, e."end", e.eventType, coalesce(e.text, s.value), {opt['domainId']}, {opt['category']},
               e.globalTid, coalesce({opt['int64Value']}, {opt['uint64Value']}, {opt['int32Value']},
                                     {opt['uint32Value']})
        from NVTX_EVENTS e left join StringIds s on s.id = {opt['textId']}
        where e.eventType in ({NVTX_PUSHPOP}, {NVTX_STARTEND}, {NVTX_MARK},
                              {NVTX_DOMAIN_CREATE}, {NVTX_CATEGORY})
    """
    rows = con.execute(sql).fetchall()
    # domain and category ids are per process; key them by (pid, id), falling back to the id alone
    domains, categories = {}, {}
    for r in rows:
        pid = None if r[6] is None else _pid(r[6])
        if r[2] == NVTX_DOMAIN_CREATE and r[4] is not None:
            domains[(pid, r[4])] = domains[(None, r[4])] = r[3]
        elif r[2] == NVTX_CATEGORY and r[5] is not None:
            categories[(pid, r[4], r[5])] = categories[(None, r[4], r[5])] = r[3]
    out = []
    for start, end, etype, text, dom, cat, gtid, payload in rows:
        if etype not in NVTX_RANGE_TYPES and etype != NVTX_MARK:
            continue
        pid = None if gtid is None else _pid(gtid)
        dname = domains.get((pid, dom), domains.get((None, dom)))
        cname = categories.get((pid, dom, cat), categories.get((None, dom, cat)))
        out.append((int(start), None if end is None else int(end), int(etype), text,
                    dname if dname is not None else (None if dom in (None, 0) else f"domain{dom}"),
                    cname if cname is not None else (None if cat in (None, 0) else str(cat)), pid, payload))
    return _frame(out, NVTX_COLUMNS)


def _frame(rows: list, types: dict):
    """A DataFrame of ``rows`` (tuples in the order of ``types``), each column made in its type at once
    (through float64, integers past 2^53 would round)."""
    cols = list(zip(*rows)) if rows else [()] * len(types)
    return pd.DataFrame({c: pd.array(list(v), dtype=t) for (c, t), v in zip(types.items(), cols)})


def _read_kernels(con, path, tables):
    if "CUPTI_ACTIVITY_KIND_KERNEL" not in tables:
        return _frame([], KERNEL_COLUMNS)
    kcols = _columns(con, path, "CUPTI_ACTIVITY_KIND_KERNEL", {"start", "end", "deviceId", "streamId", "demangledName"})
    short, gpid, corr = (f"k.{c}" if c in kcols else "NULL" for c in ("shortName", "globalPid", "correlationId"))
    runtime = "CUPTI_ACTIVITY_KIND_RUNTIME" in tables and corr != "NULL"
    # correlation ids repeat across processes: join within the kernel's own process
    join = (f"""left join CUPTI_ACTIVITY_KIND_RUNTIME r on r.correlationId = k.correlationId
                and ({gpid} is null or (r.globalTid >> 24) = ({gpid} >> 24))
                left join StringIds an on an.id = r.nameId""" if runtime else "")
    rsel = "r.globalTid, r.start, r.\"end\", an.value" if runtime else "NULL, NULL, NULL, NULL"
    sql = f"""
        select k.start, k."end", dn.value, sn.value, k.deviceId, k.streamId, {corr}, {gpid},
               {rsel}
        from CUPTI_ACTIVITY_KIND_KERNEL k
        left join StringIds dn on dn.id = k.demangledName
        left join StringIds sn on sn.id = {short}
        {join}
        order by k.start
    """
    out = []
    for start, end, dname, sname, dev, stream, corr_, gpid_, rtid, rstart, rend, api in con.execute(sql):
        pid = _pid(gpid_) if gpid_ is not None else (_pid(rtid) if rtid is not None else None)
        out.append((int(start), int(end), dname or sname, sname, dev, stream, corr_, pid,
                    None if rtid is None else int(rtid) & 0xFFFFFF, rstart, rend, api))
    return _frame(out, KERNEL_COLUMNS)


def read_report(path) -> NsysReport:
    """Read one Nsight Systems SQLite export (NVTX ranges/marks, kernels with their launches)."""
    path = Path(path)
    con = _connect(path)
    try:
        tables = {r[0] for r in con.execute("select name from sqlite_master where type='table'")}
        missing = [t for t in _REQUIRED if t not in tables]
        if missing:
            what = "no NVTX events (was the run traced with -t nvtx?)" if missing == ["NVTX_EVENTS"] else ""
            raise NsysError(path, f"missing table {', '.join(missing)}"
                            + (f": {what}" if what else " (not an nsys SQLite export?)"))
        version = con.execute("select value from META_DATA_EXPORT where name='EXPORT_SCHEMA_VERSION'").fetchone() \
            if "META_DATA_EXPORT" in tables else None
        start = con.execute("select utcEpochNs from TARGET_INFO_SESSION_START_TIME").fetchone()
        if start is None or start[0] is None:
            raise NsysError(path, "table TARGET_INFO_SESSION_START_TIME has no utcEpochNs row")
        if not 0 <= int(start[0]) < MAX_EPOCH_NS:
            raise NsysError(path, f"table TARGET_INFO_SESSION_START_TIME's utcEpochNs {int(start[0])} is no wall clock")
        nvtx, bad_nvtx = _timed(_read_nvtx(con, path))
        kernels, bad_kernels = _timed(_read_kernels(con, path, tables), launch=True)
    except sqlite3.DatabaseError as exc:
        raise NsysError(path, f"unreadable nsys export: {exc}") from None
    except NsysError:
        raise
    except (TypeError, ValueError, OverflowError) as exc:   # a value of the wrong type in a column
        raise NsysError(path, f"unexpected value in the export ({type(exc).__name__}: "
                              f"{' '.join(str(exc).split())[:120]})") from None
    finally:
        con.close()
    version = version[0] if version else None
    if version is not None and not str(version).startswith("3."):
        warnings.warn(f"{path}: nsys export schema {version}; ringscope reads schema 3.x", stacklevel=2)
    return NsysReport(str(path), version, int(start[0]), nvtx, kernels, bad_nvtx + bad_kernels)

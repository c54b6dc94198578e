"""Read what the overlay needs from one ``nsys export --type sqlite`` file.

Times stay as nsys wrote them (ns on the session timeline); ``session_start_epoch_ns`` is the UTC epoch
of session time 0.
"""
from __future__ import annotations

import sqlite3
import warnings
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from viewer.io.ranges import MAX_EPOCH_NS, MAX_NS
from viewer.nsys import constants as C
from viewer.nsys.errors import NsysError

NVTX_COLUMNS = {"start": "int64", "end": "Int64", "event_type": "int32", "name": "string", "domain": "string",
                "category": "string", "pid": "Int64", "tid": "Int64", "end_tid": "Int64", "payload": "Int64",
                "global_tid": "Int64"}
KERNEL_COLUMNS = {"start": "int64", "end": "int64", "name": "string", "short_name": "string", "device": "Int64",
                  "context": "Int64", "stream": "Int64", "correlation": "Int64", "pid": "Int64",
                  "launch_tid": "Int64", "launch_start": "Int64", "launch_end": "Int64", "api": "string"}


@dataclass
class NsysReport:
    """One export: ``nvtx`` (ranges and marks) and ``kernels`` DataFrames; ``skipped``: rows left out for
    times no session can hold."""

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
    if head != C.SQLITE_MAGIC:
        hint = " (export it with: nsys export --type sqlite)" if path.suffix == ".nsys-rep" else ""
        raise NsysError(path, f"not an SQLite file{hint}")
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        con.execute("select count(*) from sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        raise NsysError(path, f"unreadable SQLite: {exc}") from None
    return con


def _tables(con) -> set[str]:
    return {r[0] for r in con.execute("select name from sqlite_master where type='table'")}


def _columns(con, path, table: str, need: set) -> set[str]:
    cols = {r[1] for r in con.execute(f"pragma table_info({table})")}
    if need - cols:
        raise NsysError(path, f"table {table} lacks column(s) {', '.join(sorted(need - cols))}")
    return cols


def _schema_version(con, tables) -> str | None:
    if C.T_META_EXPORT not in tables:
        return None
    row = con.execute(f"select value from {C.T_META_EXPORT} where name='EXPORT_SCHEMA_VERSION'").fetchone()
    return row[0] if row else None


def _session_start(con, path) -> int:
    row = con.execute(f"select utcEpochNs from {C.T_SESSION}").fetchone()
    if row is None or row[0] is None:
        raise NsysError(path, f"table {C.T_SESSION} has no utcEpochNs row")
    if not 0 <= int(row[0]) < MAX_EPOCH_NS:
        raise NsysError(path, f"table {C.T_SESSION}'s utcEpochNs {int(row[0])} is no wall clock")
    return int(row[0])


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


def _read_nvtx(con, path):
    cols = _columns(con, path, C.T_NVTX, {"start", "end", "eventType", "text", "globalTid"})
    opt = {c: (f"e.{c}" if c in cols else "NULL") for c in
           ("textId", "domainId", "category", "endGlobalTid", "int64Value", "uint64Value",
            "int32Value", "uint32Value")}
    sql = f"""
        select e.start, e."end", e.eventType, coalesce(e.text, s.value), {opt['domainId']},
               {opt['category']}, e.globalTid, {opt['endGlobalTid']},
               coalesce({opt['int64Value']}, {opt['uint64Value']}, {opt['int32Value']},
                        {opt['uint32Value']})
        from {C.T_NVTX} e left join {C.T_STRINGS} s on s.id = {opt['textId']}
        where e.eventType in ({C.NVTX_PUSHPOP}, {C.NVTX_STARTEND}, {C.NVTX_MARK},
                              {C.NVTX_DOMAIN_CREATE}, {C.NVTX_CATEGORY})
    """
    rows = con.execute(sql).fetchall()
    # domain and category ids are per process; key them by (pid, id), falling back to the id alone
    domains, categories = {}, {}
    for r in rows:
        pid = None if r[6] is None else C.pid_of(r[6])
        if r[2] == C.NVTX_DOMAIN_CREATE and r[4] is not None:
            domains[(pid, r[4])] = domains[(None, r[4])] = r[3]
        elif r[2] == C.NVTX_CATEGORY and r[5] is not None:
            categories[(pid, r[4], r[5])] = categories[(None, r[4], r[5])] = r[3]
    out = []
    for start, end, etype, text, dom, cat, gtid, egtid, payload in rows:
        if etype not in C.NVTX_RANGE_TYPES and etype != C.NVTX_MARK:
            continue
        gtid = int(gtid) if gtid is not None else None
        pid = None if gtid is None else C.pid_of(gtid)
        dname = domains.get((pid, dom), domains.get((None, dom)))
        cname = categories.get((pid, dom, cat), categories.get((None, dom, cat)))
        out.append((
            int(start), None if end is None else int(end), int(etype), text,
            dname if dname is not None else (None if dom in (None, 0) else f"domain{dom}"),
            cname if cname is not None else (None if cat in (None, 0) else str(cat)),
            pid, None if gtid is None else C.tid_of(gtid),
            None if egtid is None else C.tid_of(egtid), payload, gtid))
    return _frame(out, NVTX_COLUMNS)


def _frame(rows: list, types: dict):
    """A DataFrame of ``rows`` (tuples in the order of ``types``), each column made in its type at once
    (through float64, integers past 2^53 would round)."""
    cols = list(zip(*rows)) if rows else [()] * len(types)
    return pd.DataFrame({c: pd.array(list(v), dtype=t) for (c, t), v in zip(types.items(), cols)})


def _read_kernels(con, path, tables):
    if C.T_KERNEL not in tables:
        return _frame([], KERNEL_COLUMNS)
    kcols = _columns(con, path, C.T_KERNEL, {"start", "end", "deviceId", "streamId", "demangledName"})
    short, gpid, corr, ctx = (f"k.{c}" if c in kcols else "NULL"
                              for c in ("shortName", "globalPid", "correlationId", "contextId"))
    runtime = C.T_RUNTIME in tables and corr != "NULL"
    # correlation ids repeat across processes: join within the kernel's own process
    join = (f"""left join {C.T_RUNTIME} r on r.correlationId = k.correlationId
                and ({gpid} is null or (r.globalTid >> 24) = ({gpid} >> 24))
                left join {C.T_STRINGS} an on an.id = r.nameId""" if runtime else "")
    rsel = "r.globalTid, r.start, r.\"end\", an.value" if runtime else "NULL, NULL, NULL, NULL"
    sql = f"""
        select k.start, k."end", dn.value, sn.value, k.deviceId, {ctx}, k.streamId, {corr}, {gpid},
               {rsel}
        from {C.T_KERNEL} k
        left join {C.T_STRINGS} dn on dn.id = k.demangledName
        left join {C.T_STRINGS} sn on sn.id = {short}
        {join}
        order by k.start
    """
    out = []
    for (start, end, dname, sname, dev, ctx_, stream, corr_, gpid_, rtid, rstart, rend,
         api) in con.execute(sql):
        pid = C.pid_of(gpid_) if gpid_ is not None else (C.pid_of(rtid) if rtid is not None else None)
        out.append((int(start), int(end), dname or sname, sname, dev, ctx_, stream, corr_, pid,
                    None if rtid is None else C.tid_of(rtid), rstart, rend, api))
    return _frame(out, KERNEL_COLUMNS)


def read_report(path) -> NsysReport:
    """Read one Nsight Systems SQLite export (NVTX ranges/marks, kernels with their launches)."""
    path = Path(path)
    con = _connect(path)
    try:
        tables = _tables(con)
        missing = [t for t in C.REQUIRED_TABLES if t not in tables]
        if missing:
            what = "no NVTX events (was the run traced with -t nvtx?)" if missing == [C.T_NVTX] else ""
            raise NsysError(path, f"missing table {', '.join(missing)}"
                            + (f": {what}" if what else " (not an nsys SQLite export?)"))
        version = _schema_version(con, tables)
        start = _session_start(con, path)
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
    if version is not None and not str(version).startswith("3."):
        warnings.warn(f"{path}: nsys export schema {version}; ringscope reads schema 3.x", stacklevel=2)
    return NsysReport(str(path), version, start, nvtx, kernels, bad_nvtx + bad_kernels)

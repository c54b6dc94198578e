"""Which nsys process is which rank: ``RANK=FILE``, else the rank in ringscope's NVTX events, else the pid."""
from __future__ import annotations

import re
from dataclasses import dataclass

from tracer import vocab
from viewer.nsys.errors import NsysError
from viewer.nsys.reader import NVTX_MARK, RINGSCOPE_DOMAIN

_RANK_RE = re.compile(r"\brank[\s=:#]*(\d+)\b", re.IGNORECASE)


@dataclass(frozen=True)
class ProcessRank:
    file: str
    pid: int
    rank: int
    how: str          # "explicit" | "nvtx" | "pid"


def ringscope_nvtx(nvtx):
    """The NVTX events in the ringscope domain (domain name ``ringscope`` or ``ringscope.*``)."""
    dom = nvtx["domain"].fillna("")
    return nvtx[(dom == RINGSCOPE_DOMAIN) | dom.str.startswith(RINGSCOPE_DOMAIN + ".")
                | dom.str.startswith(RINGSCOPE_DOMAIN + "/")]


def ringscope_nvtx_message(name: str, thread: str | None = None, tensor: str | None = None,
                           step: int | None = None) -> str | None:
    """The NVTX range message ``tracer.timeline.NvtxRecorder`` emits for one trace event (None: none;
    spans recorded after the fact and tensor lifecycle slices have no range)."""
    if name in (vocab.CYCLE, vocab.MEMCPY_IN_FUSION_BUFFER, vocab.MEMCPY_OUT_FUSION_BUFFER):
        return None
    if name == vocab.STEP:
        return None if step is None or step < 0 else f"{vocab.STEP} {step}"
    if thread == "tensor":
        return None
    return name


def rank_from_nvtx(events) -> int | None:
    """The rank that a process's ringscope NVTX events carry, or None. Conflicting ranks: None."""
    names = events["name"].fillna("")
    # marks, ranges named "ringscope...", categories and domain names; never tensor-named ranges
    texts = list(names[(events["event_type"] == NVTX_MARK) | names.str.startswith(RINGSCOPE_DOMAIN)])
    texts += list(events["category"].dropna()) + list(events["domain"].dropna())
    found = {int(m.group(1)) for text in set(texts) if (m := _RANK_RE.search(str(text)))}
    return found.pop() if len(found) == 1 else None


def map_processes(reports, explicit: dict | None = None, trace_pids: dict | None = None) -> list[ProcessRank]:
    """``ProcessRank`` per process with ringscope NVTX events or kernels (NsysError: a rank claimed twice)."""
    explicit = {str(k): v for k, v in (explicit or {}).items()}
    by_pid = {}
    for rank, pid in (trace_pids or {}).items():
        if pid is not None:
            by_pid.setdefault(int(pid), []).append(int(rank))
    out: list[ProcessRank] = []
    for rep in reports:
        rs = ringscope_nvtx(rep.nvtx)
        with_rs = set(rs["pid"].dropna().astype(int))
        pids = sorted(with_rs | set(rep.kernels["pid"].dropna().astype(int)))
        if rep.file in explicit:
            cands = sorted(with_rs) or pids
            if len(cands) != 1:
                raise NsysError(rep.file, f"{len(cands)} candidate processes ({cands}) for the explicit "
                                "rank mapping; export one process per file")
            out.append(ProcessRank(rep.file, cands[0], int(explicit[rep.file]), "explicit"))
            continue
        for pid in pids:
            rank = rank_from_nvtx(rs[rs["pid"] == pid])
            how = "nvtx"
            if rank is None and len(by_pid.get(pid, [])) == 1:
                rank, how = by_pid[pid][0], "pid"
            if rank is not None:
                out.append(ProcessRank(rep.file, pid, rank, how))
    seen = {}
    for pr in out:
        if pr.rank in seen:
            other = seen[pr.rank]
            raise NsysError(pr.file, f"process {pr.pid} and process {other.pid} ({other.file}) "
                            f"both map to rank {pr.rank}; give RANK=FILE explicitly")
        seen[pr.rank] = pr
    return out


def parse_spec(spec: str):
    """``--nsys`` argument: ``RANK=FILE`` -> (rank, file); ``FILE`` -> (None, file)."""
    m = re.fullmatch(r"(\d+)=(.+)", spec)
    return (int(m.group(1)), m.group(2)) if m else (None, spec)

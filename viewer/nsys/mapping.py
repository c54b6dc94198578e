"""Which nsys process is which rank.

In order of precedence:
1. explicit ``RANK=FILE`` (the file's one ringscope process, or its one process with kernels);
2. the rank that ringscope's own NVTX events carry: in the ``ringscope`` domain, a mark, a range
   named ``ringscope...``, a category or the domain name reading ``rank=N`` / ``rank N`` / ``rank:N``;
3. the process id, against the ``pid`` each rank's trace recorded (one host, or unique pids).
Processes with neither ringscope NVTX events nor kernels (launchers, mpiexec) are skipped.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from viewer.nsys.constants import NVTX_MARK, RINGSCOPE_DOMAIN
from viewer.nsys.errors import NsysError

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


def rank_from_nvtx(events) -> int | None:
    """The rank that a process's ringscope NVTX events carry, or None. Conflicting ranks: None."""
    names = events["name"].fillna("")
    # marks, ranges named "ringscope...", categories and domain names; never tensor-named ranges
    texts = list(names[(events["event_type"] == NVTX_MARK) | names.str.startswith(RINGSCOPE_DOMAIN)])
    texts += list(events["category"].dropna()) + list(events["domain"].dropna())
    found = set()
    for text in set(texts):
        m = _RANK_RE.search(str(text))
        if m:
            found.add(int(m.group(1)))
    return found.pop() if len(found) == 1 else None


def _interesting(report) -> list[int]:
    """Processes that either emitted ringscope NVTX events or launched kernels."""
    rs = ringscope_nvtx(report.nvtx)
    pids = set(rs["pid"].dropna().astype(int)) | set(report.kernels["pid"].dropna().astype(int))
    return sorted(pids)


def map_processes(reports, explicit: dict | None = None, trace_pids: dict | None = None) -> list[ProcessRank]:
    """Map every interesting process of ``reports`` to a rank.

    ``explicit``: {file path: rank} from ``RANK=FILE``; ``trace_pids``: {rank: pid} from the traces.
    Raises NsysError when two processes claim one rank or an explicit file is ambiguous.
    """
    explicit = {str(k): v for k, v in (explicit or {}).items()}
    by_pid = {}
    for rank, pid in (trace_pids or {}).items():
        if pid is not None:
            by_pid.setdefault(int(pid), []).append(int(rank))
    out: list[ProcessRank] = []
    for rep in reports:
        pids = _interesting(rep)
        rs = ringscope_nvtx(rep.nvtx)
        if rep.file in explicit:
            with_rs = sorted(set(rs["pid"].dropna().astype(int)))
            cands = with_rs or pids
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


def unmapped(reports, mapped: list[ProcessRank]) -> list[tuple[str, int]]:
    """(file, pid) of processes that launched kernels but got no rank."""
    have = {(m.file, m.pid) for m in mapped}
    return [(r.file, p) for r in reports for p in sorted(set(r.kernels["pid"].dropna().astype(int)))
            if (r.file, p) not in have]


def parse_spec(spec: str):
    """``--nsys`` argument: ``RANK=FILE`` -> (rank, file); ``FILE`` -> (None, file)."""
    m = re.fullmatch(r"(\d+)=(.+)", spec)
    if m:
        return int(m.group(1)), m.group(2)
    return None, spec

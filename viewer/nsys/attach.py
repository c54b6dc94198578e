"""Overlay Nsight Systems exports on a loaded run: the one call ``ringscope merge --nsys`` and the dashboard make."""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path

import pandas as pd

from viewer import frames
from viewer.nsys import align, mapping, overlay
from viewer.nsys.errors import NsysError
from viewer.nsys.reader import NVTX_RANGE_TYPES, read_report


@dataclass
class NsysOverlay:
    """Aligned kernels of every mapped rank, how each rank was mapped and aligned, and warnings."""

    aligned: object                  # overlay.align_kernels' DataFrame, attributed to responses
    ranks: dict                      # rank -> {"file", "pid", "how", **asdict(Alignment)}
    warnings: list

    def report_lines(self) -> list[str]:
        """One line per rank: file, mapping, alignment method, residual and spread."""
        return [f"rank {r}: {i['file']} pid {i['pid']} (mapped by {i['how']}), aligned by {i['method']} on "
                f"{i['matched']} NVTX ranges: residual {i['residual_ns'] / 1000:+.1f} us, spread "
                f"{i['spread_ns'] / 1000:.1f} us, {i['kernels']} kernels ({i['nccl_kernels']} NCCL)"
                for r, i in sorted(self.ranks.items())]


def _trace_ranges(events, rank: int):
    """The rank's spans keyed by the NVTX message the tracer gave them (those it gave one)."""
    e = events[(events["rank"] == rank) & (events["ph"] == "X")]
    keys = [mapping.ringscope_nvtx_message(n, th, None if pd.isna(t) else t, s)
            for n, th, t, s in zip(e["name"], e["thread"], e["tensor"], e["step"])]
    out = pd.DataFrame({"name": keys, "t_ns": e["t_ns"].to_numpy()})
    return out[out["name"].notna()]


def attach_nsys(tables, specs, *, min_matches: int = 8) -> NsysOverlay:
    """Read, map, align and attribute the nsys exports named by ``specs`` (``FILE`` or ``RANK=FILE``)."""
    parsed = [mapping.parse_spec(str(spec)) for spec in specs]
    files = list(dict.fromkeys(f for _, f in parsed))
    explicit = {str(Path(f)): rank for rank, f in parsed if rank is not None}
    reports = [read_report(f) for f in files]   # each named str(Path(f)), as the explicit keys
    ranks_df = tables.ranks
    trace_pids = {int(r.rank): (None if pd.isna(r.pid) else int(r.pid)) for r in ranks_df.itertuples()}
    offsets = {int(r.rank): (0 if pd.isna(r.clock_offset_ns) else int(r.clock_offset_ns))
               for r in ranks_df.itertuples()}
    origin = int(tables.meta.get("origin_epoch_ns") or 0)
    mapped = mapping.map_processes(reports, explicit, trace_pids)
    warnings = []
    if not mapped:
        raise NsysError(files[0], "no process could be mapped to a rank (no ringscope NVTX events "
                        "carrying a rank, no matching pid); pass RANK=FILE")
    by_file = {r.file: r for r in reports}
    parts, infos = [], {}
    for pr in mapped:
        rep = by_file[pr.file]
        if pr.rank not in offsets:
            warnings.append(f"{pr.file}: process {pr.pid} is rank {pr.rank}, which the run does not have")
            continue
        coarse = rep.session_start_epoch_ns - origin - offsets[pr.rank]   # nsys's UTC taken as the rank's clock
        nv = mapping.ringscope_nvtx(rep.nvtx)
        nv = nv[(nv["pid"] == pr.pid) & nv["event_type"].isin(NVTX_RANGE_TYPES) & nv["end"].notna()]
        al = align.refine(nv, _trace_ranges(tables.events, pr.rank), coarse, min_matches=min_matches)
        if al.warning:
            warnings.append(f"{pr.file}: rank {pr.rank}: {al.warning}")
        k = overlay.align_kernels(rep.kernels, pr.pid, pr.rank, al.offset_ns)
        parts.append(k)
        infos[pr.rank] = {"file": pr.file, "pid": pr.pid, "how": pr.how, **asdict(al),
                          "kernels": len(k), "nccl_kernels": int(k["nccl"].sum())}
    for rep in reports:
        if rep.kernels.empty:
            warnings.append(f"{rep.file}: no CUDA kernels in this export (captured without -t cuda?)")
        if rep.skipped:
            warnings.append(f"{rep.file}: {rep.skipped} row(s) with times no session can hold (negative, past "
                            "1e18 ns, or an end before the start) left out")
    have = {(m.file, m.pid) for m in mapped}
    warnings += [f"{r.file}: process {pid} launched kernels but maps to no rank; pass RANK=FILE" for r in reports
                 for pid in sorted(set(r.kernels["pid"].dropna().astype(int))) if (r.file, pid) not in have]
    aligned = pd.concat(parts, ignore_index=True) if parts else overlay.align_kernels(
        reports[0].kernels.iloc[:0], -1, -1, 0)
    aligned = overlay.attribute(aligned, tables.events)
    return NsysOverlay(aligned, infos, warnings)


def with_gpu_rows(tables, ov: NsysOverlay):
    """A copy of ``tables`` with the overlay's GPU rows in its events and ``meta["nsys"]`` per rank."""
    events = frames.concat("events", [tables.events, overlay.gpu_event_rows(ov.aligned)])
    events = events.sort_values(["t_ns", "rank"], kind="stable", ignore_index=True)
    meta = dict(tables.meta)
    meta["nsys"] = {int(r): dict(v) for r, v in ov.ranks.items()}
    return replace(tables, events=events, meta=meta)

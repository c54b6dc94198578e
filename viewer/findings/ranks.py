"""Findings about ranks: a death or hang, cut traces, a late host, a late rank, a phase far off."""
from __future__ import annotations

from viewer import units
from viewer.analyses import cores, hangs
from viewer.findings.rule import at_worst_step, finding, optional, rule


def _ranks_of(late_hosts) -> set:
    return {int(r) for rs in (late_hosts["ranks"] if late_hosts is not None and len(late_hosts) else []) for r in rs}


def _why(causes, late_only: bool = True) -> dict:
    """``{rank: the root cause's sentence}`` for the late ranks (or every rank it named)."""
    if causes is None or not len(causes):
        return {}
    named = causes[causes["late"].astype(bool)] if late_only else causes
    return dict(zip(named["rank"].astype(int), named["message"]))


def _its(message: str, rank: int) -> str:
    """A root cause's sentence about ``rank``, said after "rank N:"."""
    own = f"rank {rank}'s "
    return "its " + message[len(own):] if message.startswith(own) else message


def _cost(per_step_ns, share, steps) -> str:
    return (f"{units.duration(per_step_ns)} per step ({share:.0f} % of the step)" if steps
            else f"{units.duration(per_step_ns)} in total")


@rule("negotiation")
def stragglers(run, peak=None):
    """A rank flagged late, with its root cause; a late host's ranks are left to :func:`late_hosts`."""
    late = run.late_ranks()
    why, on_late_host = _why(optional(run, "root_cause")), _ranks_of(optional(run, "late_hosts"))
    out = []
    for _, r in late.iterrows():
        rank, share = int(r["rank"]), float(r["share_pct"])
        if rank in on_late_host:
            continue
        cost = _cost(r["per_step_ns"], share, r["steps"])
        msg = (f"rank {rank} was the last to have its bucket ready in {r['pct_last']:.0f} % of DDP's buckets "
               f"and cost the others {cost}" if "ddp" in run.has else
               f"rank {rank} was last in {r['pct_last']:.0f} % of negotiations and cost the others {cost}")
        if rank in why:
            msg += "; " + why[rank]
        else:
            msg += (f"; median lateness {units.duration(r['median_lateness_ns'])}: look at what rank {rank} does "
                    "before it submits (data loading, host load, a slower device or extra work)")
        out.append(finding("straggler", "high" if share >= 10 or not r["steps"] else "medium", 50 + share,
                           f"rank {rank} is the straggler: it cost the others {cost}", msg, ranks=[rank],
                           metric="wait_imposed_per_step_ns", value=r["per_step_ns"], unit="ns"))
    return at_worst_step(run, out, optional(run, "negotiations"))


@rule("negotiation", "hosts")
def late_hosts(run, peak=None):
    """:func:`late_host_rows` on the run, each with the step where its host held the others up most."""
    rows = late_host_rows(run.late_hosts(), {int(r) for r in run.late_ranks()["rank"]},
                          _why(optional(run, "root_cause"), late_only=False))
    return at_worst_step(run, rows, optional(run, "negotiations"))


def late_host_rows(lh, flagged=(), why=None) -> list[dict]:
    """A host whose ranks were all late together, named once, with its ``flagged`` ranks and ``why``."""
    why = why or {}
    out = []
    for _, h in lh.iterrows():
        ranks, share = [int(r) for r in h["ranks"]], float(h["share_pct"])
        cost = _cost(h["per_step_ns"], share, h["steps"])
        msg = (f"all {len(ranks)} ranks of host {h['host']} (ranks {', '.join(map(str, ranks))}) were late "
               f"together: the host was ready after every rank of the other hosts in {h['pct_last']:.0f} % of "
               f"negotiations, {units.duration(h['median_lead_ns'])} after them at the median, and cost the others "
               f"{cost}; the other hosts' ranks were not")
        named = [r for r in ranks if r in flagged]
        if named:
            msg += f"; on its own the straggler rule would flag rank(s) {', '.join(map(str, named))}"
        msg += "".join(f"; rank {r}: {_its(why[r], r)}" for r in ranks if r in why)
        unc = h["clock_uncertainty_ns"]
        doubt = unc is not None and unc == unc and float(h["median_lead_ns"]) <= 2 * float(unc)
        if doubt:
            msg += (f"; that lead is within twice the host's clock-offset uncertainty (±{units.duration(unc)}), so "
                    "part of it may be the hosts' clocks disagreeing rather than the host being late")
        msg += (f": look at host {h['host']} as a whole (its load, data loading from its disks or network, "
                "CPU frequency, other jobs on it) rather than at one rank")
        out.append(finding("late_host", "medium" if doubt or share < 10 and h["steps"] else "high", 52 + share,
                           f"host {h['host']} is late: its ranks cost the others {cost}", msg, ranks=ranks,
                           metric="per_step_ns", value=h["per_step_ns"], unit="ns"))
    return out


@rule("negotiation", "steps")
def imbalance(run, peak=None):
    """A rank not flagged late whose phase is far longer than the others' (not on a late host)."""
    causes = run.root_cause()
    skip = _ranks_of(optional(run, "late_hosts"))
    others = causes[~causes["late"].astype(bool) & ~causes["rank"].astype(int).isin(skip)
                    & (causes["cause"] != "core_sharing")]
    out = []
    for _, r in others.iterrows():
        rank = int(r["rank"])
        out.append(finding("phase_imbalance", "high" if r["share_pct"] >= 10 else "medium",
                           45 + min(r["share_pct"], 50),
                           f"rank {rank}'s {r['explained_by']} runs {units.duration(r['excess_ns'])} longer per "
                           "step than the others'", r["message"], ranks=[rank], metric="excess_ns",
                           value=r["excess_ns"], unit="ns"))
    return out


@rule()
def core_sharing(run, peak=None):
    """Ranks on CPUs shared by more ranks than CPUs, once (info), with the lateness and phases that explains."""
    shared = run.core_sharing()
    if not len(shared):
        return []
    causes = optional(run, "root_cause")
    explained = causes[causes["cause"] == "core_sharing"] if causes is not None else shared.iloc[:0]
    candidates = set(run.late_candidates()["rank"].astype(int)) if run.why_not("late_candidates") is None else set()
    late, longer, within = [], [], []
    for _, c in explained.iterrows():
        r = int(c["rank"])
        what = f"{c['explained_by']} {units.duration(c['excess_ns'])} longer per step" if c["explained_by"] else ""
        if r in candidates:
            late.append(r)
            within.append(f"rank {r} last in {c['pct_last']:.0f} % of negotiations" + (f", its {what}" if what else ""))
        else:
            longer.append(r)
            within.append(f"rank {r}'s {what}")
    where, stretch = cores.describe(shared), float(shared["stretch"].max())
    explains = " and ".join(([f"the lateness of {_ranks(late)}"] if late else [])
                            + ([f"the longer phases of {_ranks(longer)}"] if longer else []))
    title = where + (f", which explains {explains}" if explains else "")
    msg = (f"{where}: with more ranks than CPUs a rank's phases can take up to {stretch:.3g}x as long as another's "
           "from core sharing alone, which the straggler and phase rules allow for"
           + (f"; within that: {'; '.join(within)}" if within else "")
           + ": to compare the ranks' own work, give each rank CPUs of its own (no more ranks than cores, bound apart)")
    return [finding("core_sharing", "info", 5, title, msg, ranks=shared["rank"])]


def _ranks(ranks) -> str:
    """"rank 3", "ranks 0 and 1", "ranks 0, 1 and 2"."""
    return f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ", ".join(map(str, ranks[:-1])) + f" and {ranks[-1]}"


@rule("runtime")
def hang(run, peak=None):
    """A rank that died (its trace stopped first), missing ranks (a hang), and cut traces."""
    hang_df, by_rank = run.hangs(), run.hangs_by_rank()
    ends = hangs.rank_ends(run.tables)
    truncated = run.meta.get("truncated_ranks") or []
    out = []
    dead = hangs.stopped_first(ends)
    if dead is not None:
        r = dead["rank"]
        out.append(finding("rank_died", "high", 100, f"rank {r} stopped first: its process was killed or crashed",
                           _died_message(dead, ends, hang_df), ranks=[r],
                           window=(dead["last_ns"] - dead["lead_ns"], dead["last_ns"] + dead["lead_ns"]),
                           metric="lead_ns", value=dead["lead_ns"], unit="ns"))
    if len(by_rank) and (dead is None or int(by_rank.iloc[0]["rank"]) != dead["rank"]):
        missing = hang_df[hang_df["kind"] == "missing"]
        root = by_rank.iloc[0]  # the earliest tensor someone never submitted
        r = int(root["rank"])
        step = f" (step {int(root['first_step'])})" if root["first_step"] >= 0 else ""
        first = missing.sort_values("first_submit_ns").iloc[0]
        waiting = ", ".join(map(str, root["waiting_ranks"])) or "the others"
        msg = (f"rank {r} never submitted {root['names'][0]}{step}"
               + (f" and {int(root['tensors']) - 1} more" if root["tensors"] > 1 else "")
               + f"; rank(s) {waiting} waited {units.duration(first['waited_ns'])} for it" + _failed(first))
        later = by_rank.iloc[1:]
        if len(later):
            msg += (f"; after that rank(s) {', '.join(str(int(x)) for x in sorted(later['rank']))} never submitted "
                    f"{int(later['tensors'].max())} tensor(s) that rank {r} went on to submit (it ran ahead)")
        t0 = int(first["first_submit_ns"])
        out.append(finding("hang", "high", 95, f"rank {r} never submitted {root['names'][0]}{step}",
                           msg + f": check rank {r}'s control flow (a skipped collective, a different model branch "
                           "or an exception)", ranks=[r], steps=[root["first_step"]],
                           window=(t0, t0 + int(first["waited_ns"])), metric="waited_ns", value=first["waited_ns"],
                           unit="ns"))
    together = hangs.cut_together(ends)
    if together is not None:
        lo, hi = together
        out.append(finding("truncated", "medium", 40, "the whole job was killed at once",
                           f"all {len(ends)} traces stop unclosed within {units.duration(hi - lo)} of each other "
                           f"({units.duration(lo)} to {units.duration(hi)} into the run): the whole job was killed "
                           "at once, as mpiexec does to every rank when one dies; each rank lost what it had not yet "
                           "written, so these traces cannot tell which rank failed first (the launcher's output "
                           "names the process) and incomplete tensors at the very end are not a hang",
                           ranks=ends["rank"], window=(lo, hi)))
    elif truncated and dead is None:
        ranks = ", ".join(map(str, sorted(truncated)))
        out.append(finding("truncated", "medium", 40, f"the traces of rank(s) {ranks} stopped mid-run",
                           f"trace(s) of rank(s) {ranks} stopped mid-run (not closed): the process crashed or was "
                           "killed; the analyses cover what was recorded", ranks=truncated))
    return out


def _failed(row) -> str:
    return ", until the stall shutdown failed it" if bool(row.get("failed", False)) else ""


def _died_message(dead, ends, hang_df) -> str:
    r = dead["rank"]
    others = ends[ends["rank"] != r]
    msg = (f"rank {r} stopped first: its trace ends {units.duration(dead['last_ns'])} into the run, "
           f"{units.duration(dead['lead_ns'])} before any other rank's, and was not closed (the process was killed "
           "or crashed)")
    waits = hang_df[[r not in s for s in hang_df["submitted_ranks"]]] if len(hang_df) else hang_df
    if len(waits):
        first = waits.sort_values("first_submit_ns").iloc[0]
        step = f" (step {int(first['step'])})" if first["step"] >= 0 else ""
        more = f" and {len(waits) - 1} more" if len(waits) > 1 else ""
        waiting = ", ".join(map(str, first["submitted_ranks"]))
        msg += (f"; rank(s) {waiting} waited {units.duration(first['waited_ns'])} for it on {first['tensor']}{step}"
                f"{more}{_failed(first)}")
    else:
        msg += f"; rank(s) {', '.join(map(str, sorted(others['rank'])))} went on without it"
    return msg + f": find why rank {r}'s process ended (out of memory, a signal, its own log)"

"""Which ranks share CPUs: per host, the groups of ranks whose CPU sets overlap, and how crowded each group is."""
from __future__ import annotations

import pandas as pd

COLUMNS = ["rank", "host", "cpu_set", "group", "cpus", "crowd", "stretch"]


def sharing(ranks: pd.DataFrame) -> pd.DataFrame:
    """``COLUMNS`` per rank of a group with more ranks than CPUs: ``group`` its ranks, ``cpus`` their CPU ids,
    ``crowd`` ranks per CPU, ``stretch`` how many times the other ranks' median a rank's phase can take from
    sharing alone, ``host`` the group's host when the ranks lie on more than one (else None).

    ``stretch``: a rank given 1/crowd of a CPU takes up to ``crowd`` times as long as one with a CPU to itself;
    but of n ranks sharing, the faster half of the others cannot all have a CPU to themselves at once, so the
    others' median is at least (n-1)/2 ranks' work over the CPUs: at most 2n/(n-1) (2.03 for 64 ranks on 2 CPUs).

    A group is the ranks of one host whose ``cpu_set`` overlap, one with another; empty when any rank's CPU
    set is unknown (traces written before ``cpu_set``) or no group has more ranks than CPUs."""
    empty = pd.DataFrame({c: pd.Series(dtype="object") for c in COLUMNS})
    if not len(ranks) or "cpu_set" not in ranks or ranks["cpu_set"].isna().any():
        return empty
    one = ranks.drop_duplicates("rank", keep="last")
    hosts = one["host"].astype(object).where(one["host"].notna(), None) if "host" in one else [None] * len(one)
    cpus_of = {int(r): {(h, int(c)) for c in str(s).split(",")} for r, h, s in zip(one["rank"], hosts, one["cpu_set"])}
    several = len(set(hosts)) > 1
    rows = []
    for group in _overlapping(cpus_of):
        cpus = set().union(*(cpus_of[r] for r in group))
        if len(group) <= len(cpus):
            continue
        ids = sorted(c for _, c in cpus)
        host = next(iter(cpus))[0] if several else None
        rows += [{"rank": r, "host": host, "cpu_set": ",".join(str(c) for _, c in sorted(cpus_of[r])),
                  "group": group, "cpus": ids, "crowd": len(group) / len(cpus),
                  "stretch": min(len(group) / len(cpus), 2 * len(group) / (len(group) - 1))} for r in group]
    return pd.DataFrame(rows, columns=COLUMNS) if rows else empty


def _overlapping(cpus_of: dict) -> list[list[int]]:
    """The ranks in groups whose CPU sets overlap, one with another (sorted; each group sorted)."""
    parent = {r: r for r in cpus_of}

    def root(r):
        while parent[r] != r:
            r = parent[r]
        return r

    first: dict = {}   # a CPU -> the first rank on it
    for r in sorted(cpus_of):
        for c in cpus_of[r]:
            parent[root(r)] = root(first.setdefault(c, r))
    groups: dict = {}
    for r in sorted(cpus_of):
        groups.setdefault(root(r), []).append(r)
    return sorted(groups.values())


def describe(shared: pd.DataFrame, rank: int | None = None) -> str:
    """The groups (``rank``'s only, when given) in words: "ranks 0 and 1 share CPU 0", "ranks 0-3 share CPUs
    0 and 1 on host h0" (the host named when the run has several)."""
    rows = shared.drop_duplicates("rank").set_index("rank")
    groups = {tuple(g): h for g, h in zip(rows["group"], rows["host"])}
    out = []
    for group, host in groups.items():
        if rank is not None and rank not in group:
            continue
        cpus = rows.loc[group[0], "cpus"]
        out.append(f"ranks {_list(group)} share CPU{'s' if len(cpus) > 1 else ''} {_list(cpus)}"
                   + (f" on host {host}" if host is not None else ""))
    return "; ".join(out)


def _list(xs) -> str:
    xs = [int(x) for x in xs]
    if len(xs) > 2 and xs == list(range(xs[0], xs[-1] + 1)):
        return f"{xs[0]}-{xs[-1]}"
    return ", ".join(map(str, xs[:-1])) + (" and " if len(xs) > 1 else "") + str(xs[-1])

"""``ringscope diff``'s text: the verdict first, then the phases, the movers, the ranks and the settings."""
from __future__ import annotations

from viewer import units
from viewer.diff.settings import show

ms = units.UNITS["ms"]


def _signed(v) -> str:
    return ("+" if v is not None and v > 0 else "") + ms(v)


def _table(rows: list[list[str]], head: list[str]) -> list[str]:
    """Columns padded to their widest cell; the first left-aligned, the others right-aligned."""
    cells = [head, *rows]
    w = [max(len(r[i]) for r in cells) for i in range(len(head))]
    return ["  " + "  ".join(c.ljust(w[i]) if i == 0 else c.rjust(w[i]) for i, c in enumerate(r)) for r in cells]


def _short(name: str, width: int = 70) -> str:
    return name if len(name) <= width else name[:width - 1] + "…"


def lines(d: dict) -> list[str]:
    """The diff ``d`` (:func:`viewer.diff.compare.diff_runs`) as lines of text."""
    a, b = d["a"], d["b"]
    out = [d["verdict"], *d["coincides"], *d["cautions"]]
    lo, hi = d["change_ci_pct"]
    if lo is not None:
        out.append(f"  change {_signed(d['change_ms'])} ({d['change_pct']:+.1f} %, 95 % interval "
                   f"{lo:+.1f} % to {hi:+.1f} %)")
    def run_lines(which, r):
        median = "" if r["representative_step"] is None else f"; its median step: {r['representative_step']}"
        line = f"{r['source']} ({r['format']}, {r['ranks']} ranks, {r['steps']} steps{median})"
        if len(r["runs"]) == 1:
            return [f"  {which}: {line}"]
        each = [f"    {x['source']}: {ms(x['step_ms'])}" for x in r["runs"]]
        return [f"  {which}: {len(r['runs'])} runs, their mean step {ms(r['step_ms'])}; collectives, movers and "
                f"ranks from its median run, {line}", *each]

    out += [*run_lines("A", a), *run_lines("B", b), f"  compared: {d['compared']}"]
    if d["phases"]:
        out += ["", "Where the change went, per step (mean over ranks; other: the remainder)"]
        out += _table([[p["phase"], ms(p["a_ms"]), ms(p["b_ms"]), _signed(p["delta_ms"])] for p in d["phases"]],
                      ["phase", "A", "B", "change"])
        if d["phases_unknown"]:
            out.append(f"  not in the traces (inside other): {', '.join(d['phases_unknown'])}")
    if d["collectives"]:
        out += ["", "Collectives per step and rank"]
        out += _table([[c["op"], f"{units.number(c['a_count'])} → {units.number(c['b_count'])}",
                        f"{units.size(c['a_bytes'])} → {units.size(c['b_bytes'])}",
                        f"{ms(c['a_ms'])} → {ms(c['b_ms'])}",
                        f"{units.rate(c['a_busbw_gbps'])} → {units.rate(c['b_busbw_gbps'])}",
                        f"{units.number(c['a_tensors_per_op'])} → {units.number(c['b_tensors_per_op'])}",
                        f"{units.UNITS['ratio'](c['a_fill'])} → {units.UNITS['ratio'](c['b_fill'])}"]
                       for c in d["collectives"]],
                      ["op", "ops", "bytes", "time", "busbw", "tensors per op", "median fill"])
    if d["movers"]:
        out += ["", "Movers (the biggest change of time per step)"]
        out += _table([[_short(m["name"]), m["kind"], ms(m["a_ms"]), ms(m["b_ms"]), _signed(m["delta_ms"]),
                        units.pct(m["delta_pct"]) if m["delta_pct"] is not None else "new"] for m in d["movers"]],
                      ["name", "kind", "A", "B", "change", "%"])
        if any(m["matched_by"] != "name" for m in d["movers"]):
            out.append("  (names differ between the runs: tensors matched by position and size)")
    rk = d["ranks"]
    out += ["", "Ranks"]
    if rk["a_late"] is None or rk["b_late"] is None:
        out.append("  late ranks: cannot tell (needs when each rank was ready, in both runs)")
    else:
        def late(rs):
            return ", ".join(f"rank {r}" for r in rs) or "none"

        what = ("the same" if rk["same"] else
                f"new straggler: {late(rk['new'])}" if rk["new"] else f"no longer late: {late(rk['gone'])}")
        out.append(f"  late: A {late(rk['a_late'])}; B {late(rk['b_late'])} ({what})")
    for m in rk["movers"]:
        host = f" ({m['host']})" if m["host"] else ""
        out.append(f"  rank {m['rank']}{host}: {m['phase']} {ms(m['a_ms'])} → {ms(m['b_ms'])} "
                   f"({_signed(m['delta_ms'])})")
    for h in rk["hosts"]:
        out.append(f"  host {h['host']} (ranks {', '.join(map(str, h['ranks']))}): its ranks' own work "
                   f"{_signed(h['delta_ms'])} a step")
    if d["links"]["a"] or d["links"]["b"]:
        out += ["", "Cross-host link, per step (mean over ranks)"]
        for side in ("a", "b"):
            lk = d["links"][side]
            out.append(f"  {side.upper()}: " + ("one host" if lk is None else
                       f"{'–'.join(lk['hosts'])}: busy {ms(lk['busy_ms'])}, waited on {ms(lk['waited_ms'])}, "
                       f"busbw {units.rate(lk['busbw_gbps'])} (the biggest quarter of its messages)"))
    out += ["", "Settings that differ"]
    if d["settings_changed"]:
        out += _table([[s["name"], show(s["name"], s["a"]), show(s["name"], s["b"])] for s in d["settings_changed"]],
                      ["setting", "A", "B"])
    else:
        out.append("  none in the traces' metadata")
    return out


def print_diff(d: dict) -> None:
    print("\n".join(lines(d)))

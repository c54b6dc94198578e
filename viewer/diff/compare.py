"""The diff of two runs as plain data (docs/DIFF.md): headline, phases, collectives, movers, ranks, settings,
and the sentences that say it, verdict first."""
from __future__ import annotations

from viewer import units
from viewer.diff import collectives, environment, links, phases, ranks, runs, settings, steps
from viewer.summary import clean, records

SCHEMA = "ringscope.diff/1"


def _side(run, source, st, step_ms, runs: list[dict]) -> dict:
    return {"source": source, "format": run.meta.get("format"), "ranks": run.size,
            "steps": int(run.step_times()["step"].nunique()), "steady_steps": [int(s) for s in st.index],
            "representative_step": steps.representative(st), "step_ms": step_ms, "runs": runs}


def _verdict(h: dict, ph: list[dict], rk: dict, lk: dict) -> str:
    """One sentence: how much slower or faster B is, whether beyond the noise, and where most of it went."""
    if h["change_pct"] is None:
        return f"No step time to compare: {h['compared'].removeprefix('nothing: ')}."
    ms = units.UNITS["ms"]
    way = "slower" if h["change_ms"] > 0 else "faster"
    steps = f"({ms(h['a_step_ms'])} → {ms(h['b_step_ms'])})"
    head = (f"B's step is as long as A's {steps}" if abs(h["change_pct"]) < 0.05 else
            f"B's step is {units.pct(abs(h['change_pct']))} {way} than A's {steps}")
    if not h["testable"]:
        why = h.get("why_untestable") or f"too few steps ({h['steps'][0]} and {h['steps'][1]}) to tell a change " \
            "from the noise"
        return f"{head}: {why}."
    if not h["significant"]:
        p = "" if h["p_value"] is None else f", p = {h['p_value']:.2f}"
        return f"{head}: no change beyond the noise{p}."
    noise = "the steps' noise" if h["runs"] == [1, 1] else "the noise between reruns"
    out = f"{head}, beyond {noise} (p = {h['p_value']:.3f})"
    same_way = [p for p in ph if p["delta_ms"] * h["change_ms"] > 0]
    if same_way:
        top = max(same_way, key=lambda p: abs(p["delta_ms"]))
        share = "most of it" if abs(top["delta_ms"]) > 0.5 * abs(h["change_ms"]) else "the biggest part"
        out += f"; {share} {top['phase']} ({'+' if top['delta_ms'] > 0 else ''}{ms(top['delta_ms'])})"
    if rk["new"]:
        out += f"; rank {', '.join(map(str, rk['new']))} is a new straggler"
        own = [m for m in rk["movers"] if m["rank"] in rk["new"] and m["delta_ms"] * h["change_ms"] > 0]
        if own:
            out += f" (its {own[0]['phase']} {'+' if own[0]['delta_ms'] > 0 else ''}{ms(own[0]['delta_ms'])})"
    host = rk["hosts"][0] if rk["hosts"] else None
    if host and host["delta_ms"] * h["change_ms"] > 0 and abs(host["delta_ms"]) >= 0.5 * abs(h["change_ms"]):
        out += f"; host {host['host']} got {way} (its ranks' own work {ms(host['delta_ms'])} a step)"
    waited = [(lk[k] or {}).get("waited_ms") or 0.0 for k in ("a", "b")]
    if (waited[1] - waited[0]) * h["change_ms"] > 0 and abs(waited[1] - waited[0]) >= 0.5 * abs(h["change_ms"]):
        side = lk["b"] or lk["a"]
        out += (f"; the cross-host link ({'–'.join(side['hosts'])}) carries it: waited on {ms(waited[0])} → "
                f"{ms(waited[1])} a step")
    return out + "."


def coincides(h: dict, ph: list[dict], changed: list[dict]) -> list[str]:
    """A change beyond the noise that coincides with a setting change, in words."""
    changed = [s for s in changed if s["a"] is not None and s["b"] is not None]   # not recorded: not a change
    if not h["significant"] or not changed:
        return []
    comm = [s for s in changed if s["name"] in settings.COMMUNICATION]
    what = ", ".join(f"{s['name'].replace('_', ' ')} {settings.show(s['name'], s['a'])} → "
                     f"{settings.show(s['name'], s['b'])}" for s in (comm or changed))
    by_comm = sum(p["delta_ms"] for p in ph if p["phase"] in ("negotiation", "exposed comm"))
    out = f"The change coincides with a setting change: {what}"
    if comm and by_comm * h["change_ms"] > 0:
        out += f" (communication's share of the change: {units.UNITS['ms'](by_comm)})"
    return [out + "."]


def _phases(rs, sides) -> dict | None:
    """The runs' :func:`phases.run_phases`, averaged (a phase one run lacks: counted in other in all)."""
    each = [phases.run_phases(r, list(st.index)) for r, st in zip(rs, sides)]
    if any(p is None for p in each):
        return None
    shared = {k: 0.0 for k in set.intersection(*(set(p) for p in each))}
    each = [phases.fold_unknown(p, shared) for p in each]
    return {k: sum(p[k] for p in each) / len(each) for k in shared}


def _machine(rs, sides) -> dict | None:
    """The runs' :func:`environment.machine`, averaged per figure (None where no run has it)."""
    each = [m for m in (environment.machine(r, list(st.index)) for r, st in zip(rs, sides)) if m is not None]
    if not each:
        return None
    return {k: (sum(v) / len(v) if (v := [m[k] for m in each if m[k] is not None]) else None) for k in each[0]}


def _unlike_reruns(which: str, rs, sources) -> list[str]:
    """A sentence when the runs of one side differ in a setting: they are not reruns of one setting."""
    names = {s["name"]: src for r, src in zip(rs[1:], sources[1:]) for s in settings.settings_changed(rs[0], r)}
    if not names:
        return []
    what = ", ".join(f"{n} ({names[n]})" for n in names)
    return [f"{which}'s runs differ in {what} from {sources[0]}: the spread between them is not rerun noise."]


def diff_sides(a_runs: list, b_runs: list, a_sources: list[str] | None = None, b_sources: list[str] | None = None,
               top: int = collectives.TOP_MOVERS) -> dict:
    """Everything ``ringscope diff`` reports of the runs ``a_runs`` (before) and ``b_runs`` (after), JSON-safe.

    One run a side: its steps against the other's. Several: the headline and the phases are the means over
    each side's runs, tested against the spread between them (:mod:`viewer.diff.runs`); the collectives,
    movers, ranks, links and settings come from each side's median run (its ``source``)."""
    a_sources = a_sources or [f"A{i + 1}" if len(a_runs) > 1 else "A" for i in range(len(a_runs))]
    b_sources = b_sources or [f"B{i + 1}" if len(b_runs) > 1 else "B" for i in range(len(b_runs))]
    a_sides, b_sides = [steps.steady_steps(r) for r in a_runs], [steps.steady_steps(r) for r in b_runs]
    several = len(a_runs) > 1 or len(b_runs) > 1
    h = runs.headline(a_sides, b_sides) if several else steps.headline(a_sides[0], b_sides[0])
    ia, ib = runs.representative(a_sides), runs.representative(b_sides)
    ra, rb, sa, sb = a_runs[ia], b_runs[ib], a_sides[ia], b_sides[ib]
    pc = phases.phase_changes(_phases(a_runs, a_sides), _phases(b_runs, b_sides), h["change_ms"])
    rk = ranks.rank_changes(ra, rb, list(sa.index), list(sb.index))
    changed = settings.settings_changed(ra, rb)
    ops = collectives.compare_ops(collectives.op_table(ra, sa.index), collectives.op_table(rb, sb.index))
    mv = collectives.movers(ra, rb, sa.index, sb.index)
    lk = links.link_changes(ra, rb, list(sa.index), list(sb.index))
    env = {"a": _machine(a_runs, a_sides), "b": _machine(b_runs, b_sides)}

    def each(sources, sides):
        return [{"source": src, "steady_steps": len(st), "step_ms": float(st.mean()) / 1e6 if len(st) else None}
                for src, st in zip(sources, sides)]

    out = {
        "schema": SCHEMA,
        "a": _side(ra, a_sources[ia], sa, h["a_step_ms"], each(a_sources, a_sides)),
        "b": _side(rb, b_sources[ib], sb, h["b_step_ms"], each(b_sources, b_sides)),
        "runs": h["runs"],
        "change_ms": h["change_ms"], "change_pct": h["change_pct"], "change_ci_pct": h["change_ci_pct"],
        "p_value": h["p_value"], "significant": h["significant"], "testable": h["testable"], "compared": h["compared"],
        "verdict": _verdict(h, pc["phases"], rk, lk),
        "coincides": coincides(h, pc["phases"], changed),
        "cautions": (_unlike_reruns("A", a_runs, a_sources) + _unlike_reruns("B", b_runs, b_sources)
                     + environment.cautions(env["a"], env["b"], several)),
        "environment": env,
        "phases": pc["phases"], "phases_residual_ms": pc["residual_ms"], "phases_unknown": pc["unknown"],
        "collectives": records(ops), "movers": records(mv.head(top)),
        "ranks": rk, "links": lk, "settings_changed": changed,
    }
    return clean(out)


def diff_runs(ra, rb, a_source: str = "A", b_source: str = "B", top: int = collectives.TOP_MOVERS) -> dict:
    """The diff of one run a side (:func:`diff_sides`)."""
    return diff_sides([ra], [rb], [a_source], [b_source], top)

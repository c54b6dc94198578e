"""The diff of two runs as plain data (docs/DIFF.md): headline, phases, collectives, movers, ranks, settings,
and the sentences that say it, verdict first."""
from __future__ import annotations

from viewer import units
from viewer.diff import collectives, environment, links, phases, ranks, settings, steps
from viewer.summary import clean, records

SCHEMA = "ringscope.diff/1"


def _side(run, source, st, step_ms) -> dict:
    return {"source": source, "format": run.meta.get("format"), "ranks": run.size,
            "steps": int(run.step_times()["step"].nunique()), "steady_steps": [int(s) for s in st.index],
            "representative_step": steps.representative(st), "step_ms": step_ms}


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
        return f"{head}: too few steps ({h['steps'][0]} and {h['steps'][1]}) to tell a change from the noise."
    if not h["significant"]:
        p = "" if h["p_value"] is None else f", p = {h['p_value']:.2f}"
        return f"{head}: no change beyond the noise{p}."
    out = f"{head}, beyond the steps' noise (p = {h['p_value']:.3f})"
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


def diff_runs(ra, rb, a_source: str = "A", b_source: str = "B", top: int = collectives.TOP_MOVERS) -> dict:
    """Everything ``ringscope diff`` reports of runs ``ra`` (before) and ``rb`` (after), JSON-safe."""
    sa, sb = steps.steady_steps(ra), steps.steady_steps(rb)
    h = steps.headline(sa, sb)
    pc = phases.phase_changes(phases.run_phases(ra, list(sa.index)), phases.run_phases(rb, list(sb.index)),
                              h["change_ms"])
    rk = ranks.rank_changes(ra, rb, list(sa.index), list(sb.index))
    changed = settings.settings_changed(ra, rb)
    ops = collectives.compare_ops(collectives.op_table(ra, sa.index), collectives.op_table(rb, sb.index))
    mv = collectives.movers(ra, rb, sa.index, sb.index)
    lk = links.link_changes(ra, rb, list(sa.index), list(sb.index))
    env = {"a": environment.machine(ra, list(sa.index)), "b": environment.machine(rb, list(sb.index))}
    out = {
        "schema": SCHEMA,
        "a": _side(ra, a_source, sa, h["a_step_ms"]), "b": _side(rb, b_source, sb, h["b_step_ms"]),
        "change_ms": h["change_ms"], "change_pct": h["change_pct"], "change_ci_pct": h["change_ci_pct"],
        "p_value": h["p_value"], "significant": h["significant"], "testable": h["testable"], "compared": h["compared"],
        "verdict": _verdict(h, pc["phases"], rk, lk),
        "coincides": coincides(h, pc["phases"], changed),
        "cautions": environment.cautions(env["a"], env["b"]), "environment": env,
        "phases": pc["phases"], "phases_residual_ms": pc["residual_ms"], "phases_unknown": pc["unknown"],
        "collectives": records(ops), "movers": records(mv.head(top)),
        "ranks": rk, "links": lk, "settings_changed": changed,
    }
    return clean(out)

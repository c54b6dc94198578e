"""The printed table (one per group), the target verdicts, and the JSON file."""
from __future__ import annotations

import json
import math
from pathlib import Path


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if math.isnan(v):
            return "n/a"
        a = abs(v)
        if a >= 1000:
            return f"{v:,.0f}"
        if a >= 100:
            return f"{v:.0f}"
        if a >= 10:
            return f"{v:.1f}"
        if a >= 0.01 or a == 0:
            return f"{v:.2f}"
        return f"{v:.2e}"
    return str(v)


def table(rows: list[dict], columns: list[str]) -> str:
    """A plain fixed-width text table (also valid Markdown)."""
    cells = [[_fmt(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    line = lambda vals: "| " + " | ".join(v.rjust(w) for v, w in zip(vals, widths)) + " |"  # noqa: E731
    out = [line(columns), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in cells]
    return "\n".join(out)


def verdict_lines(verdicts: list[dict]) -> list[str]:
    out = []
    for v in verdicts:
        unit = v["unit"]
        val = "not measured" if v["value"] is None else f"{_fmt(v['value'])} {unit}"
        tail = ""
        if v["status"] == "MISSED" and v["by"]:
            tail = f"  (missed by {v['by']:.2f}x)"
        gate = "" if v["kind"] == "ratio" else " [absolute]"
        out.append(f"  {v['status']:<7} {v['metric']}: {val} (target {v['op']} "
                   f"{_fmt(v['limit'])} {unit}){gate}{tail} — {v['detail']}")
    return out


def render(result: dict) -> str:
    """The whole human-readable report."""
    parts = [f"ringscope bench — {result['date']} — {result['command']}",
             f"machine: {result['machine_line']}", ""]
    for name, g in result["groups"].items():
        parts.append(f"## {name}  ({g.get('seconds', 0):.0f} s)")
        if g.get("rows"):
            parts.append(table(g["rows"], g["columns"]))
        for k, m in sorted(g.get("metrics", {}).items()):
            parts.append(f"  {k} = {_fmt(m['value'])}   {m.get('detail', '')}")
        for note in g.get("notes", []):
            parts.append(f"  note: {note}")
        parts.append("")
    parts.append("## targets")
    parts += verdict_lines(result["verdicts"])
    return "\n".join(parts)


def write_json(result: dict, path: str) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(result, indent=1, default=_default, allow_nan=True))


def _default(o):
    return str(o)

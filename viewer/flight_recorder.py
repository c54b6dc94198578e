"""torch's Flight Recorder dumps read without torch (docs/DDP.md): a folder of per-rank pickles, as
``torch._C._distributed_c10d._dump_fr_trace()`` writes them (``TORCH_FR_BUFFER_SIZE`` set; NCCL's
dump on timeout writes the same, named ``<TORCH_FR_DUMP_TEMP_FILE><rank>``).

A dump is a dict: ``version``, ``pg_config``, ``pg_status`` ({group: last enqueued / started / completed
collective sequence id}) and ``entries``, one per recorded collective: ``process_group`` (name, desc),
``collective_seq_id``, ``profiling_name`` ("gloo:all_reduce"), ``input_sizes``, ``input_dtypes``,
``is_p2p``, ``retired``. Unpickling allows no class at all: a dump holds only dicts, lists, tuples,
strings and numbers, so reading one runs no code and needs no torch.

Per process group, :func:`analyze` names each rank that never issued a collective another member
issued (by sequence id), the collectives whose op or sizes differ between ranks, and each rank's last
completed collective.
"""
from __future__ import annotations

import io
import pickle
import re
from dataclasses import dataclass
from pathlib import Path

from viewer.errors import TraceError

_RANK = re.compile(r"(\d+)$")
_KEYS = {"version", "entries", "pg_status"}


class _NoClasses(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        raise pickle.UnpicklingError(f"a Flight Recorder dump holds no {module}.{name}")


@dataclass(frozen=True)
class Dump:
    rank: int
    path: Path
    version: str
    pg_status: dict
    pg_config: dict
    entries: list


def _load(path: Path) -> dict | None:
    """The dump in ``path``, or None when it is not one (not a pickle of a dict with its keys)."""
    try:
        with open(path, "rb") as f:
            if f.read(1) != b"\x80":
                return None
            f.seek(0)
            data = _NoClasses(io.BytesIO(f.read())).load()
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError):
        return None
    return data if isinstance(data, dict) and _KEYS <= set(data) else None


def is_dump_dir(path) -> bool:
    """True when ``path`` is a folder whose files include a Flight Recorder dump (and no trace JSON)."""
    p = Path(path)
    if not p.is_dir():
        return False
    files = [f for f in sorted(p.iterdir()) if f.is_file()]
    if any(f.suffix in (".json", ".gz") for f in files):
        return False
    return any(_RANK.search(f.name) and _load(f) is not None for f in files[:64])


def read_dir(path) -> list[Dump]:
    """Every rank's dump in the folder ``path``, by rank (the trailing number of the file's name)."""
    out = {}
    for f in sorted(Path(path).iterdir()):
        m = _RANK.search(f.name)
        data = _load(f) if m and f.is_file() else None
        if data is None:
            continue
        rank = int(m.group(1))
        if rank in out:
            raise TraceError(f"{f}: a second Flight Recorder dump for rank {rank} (after {out[rank].path.name})")
        out[rank] = Dump(rank, f, str(data["version"]), dict(data.get("pg_status") or {}),
                         dict(data.get("pg_config") or {}), list(data.get("entries") or []))
    if not out:
        raise TraceError(f"{path}: no Flight Recorder dump in it")
    return [out[r] for r in sorted(out)]


def _call(e: dict) -> dict:
    return {"op": e.get("profiling_name"), "sizes": e.get("input_sizes"), "dtypes": e.get("input_dtypes")}


def _config_ranks(text) -> list[int]:
    """``pg_config``'s ranks ("[0, 1]", as NCCL's recorder writes them; gloo's are "[]")."""
    items = str(text or "").strip("[] ").split(",")
    return [int(x) for x in items if x.strip().lstrip("-").isdigit()]


def analyze(dumps: list[Dump]) -> dict:
    """Per process group: its members (ranks whose dump knows it, and those ``pg_config`` names: NCCL
    fills it, gloo does not), each rank's last enqueued and completed collective (sequence ids, -1:
    none), ``no_dump`` (members without a dump), ``missing`` (a collective some member issued and others
    never did, not merely one that left a rank's ring buffer) and ``mismatched`` (one sequence id,
    different op or sizes)."""
    groups: dict[str, dict] = {}
    configured: dict[str, set] = {}
    for d in dumps:
        for pg, cfg in d.pg_config.items():
            configured.setdefault(str(pg), set()).update(_config_ranks((cfg or {}).get("ranks")))
        for pg, st in d.pg_status.items():
            g = groups.setdefault(str(pg), {"group": str(pg), "desc": None, "ranks": {}, "calls": {}})
            g["ranks"][d.rank] = {"last_enqueued": int(st.get("last_enqueued_collective", -1)),
                                  "last_completed": int(st.get("last_completed_collective", -1)),
                                  "first_recorded": None}
        for e in d.entries:
            if e.get("is_p2p"):
                continue
            name, desc = (list(e.get("process_group") or (str(e.get("pg_id")), None)) + [None])[:2]
            g = groups.setdefault(str(name), {"group": str(name), "desc": None, "ranks": {}, "calls": {}})
            g["desc"] = g["desc"] or desc
            mine = g["ranks"].setdefault(d.rank, {"last_enqueued": -1, "last_completed": -1, "first_recorded": None})
            seq = int(e["collective_seq_id"])
            mine["last_enqueued"] = max(mine["last_enqueued"], seq)
            if mine["first_recorded"] is None or seq < mine["first_recorded"]:
                mine["first_recorded"] = seq
            g["calls"].setdefault(seq, {})[d.rank] = _call(e)
    for g in groups.values():
        g["no_dump"] = sorted(configured.get(g["group"], set()) - {d.rank for d in dumps})
    return {"ranks": [d.rank for d in dumps], "version": dumps[0].version if dumps else None,
            "groups": [_verdicts(g) for g in sorted(groups.values(), key=lambda g: g["group"])]}


def _verdicts(g: dict) -> dict:
    ranks = g["ranks"]
    missing, mismatched = [], []
    for seq in sorted(g["calls"]):
        by_rank = g["calls"][seq]
        absent = [r for r in sorted(ranks) if r not in by_rank and ranks[r]["last_enqueued"] < seq]
        if absent:
            call = next(iter(by_rank.values()))
            missing.append({"seq": seq, **call, "issued_by": sorted(by_rank), "missing_ranks": absent})
        calls = {(c["op"], repr(c["sizes"]), repr(c["dtypes"])) for c in by_rank.values()}
        if len(calls) > 1:
            mismatched.append({"seq": seq, "calls": {r: by_rank[r] for r in sorted(by_rank)}})
    return {"group": g["group"], "desc": g["desc"], "ranks": sorted(ranks),
            "last_enqueued": {r: ranks[r]["last_enqueued"] for r in sorted(ranks)},
            "last_completed": {r: ranks[r]["last_completed"] for r in sorted(ranks)},
            "no_dump": g["no_dump"], "missing": missing, "mismatched": mismatched}


def _what(c: dict) -> str:
    sizes = ", ".join("x".join(map(str, s)) or "scalar" for s in c["sizes"] or []) or "no tensor"
    dtypes = ", ".join(sorted(set(c["dtypes"] or []))) or "-"
    return f"{c['op']} ({dtypes} [{sizes}])"


def _seq(seq: int) -> str:
    return f"#{seq}" if seq >= 0 else "none"


def report(result: dict) -> list[str]:
    """The analysis as lines of text: the verdict first, then each process group."""
    lines, verdicts = [], []
    for g in result["groups"]:
        name = f"process group {g['group']}" + (f" ({g['desc']})" if g["desc"] else "")
        if g["no_dump"]:
            verdicts.append(f"{name}: no dump from member rank(s) {', '.join(map(str, g['no_dump']))} (its process "
                            "died, or its dump was not written): what it last did is unknown")
        for m in g["missing"][:1]:
            verdicts.append(f"{name}: rank(s) {', '.join(map(str, m['missing_ranks']))} never issued collective "
                            f"#{m['seq']}, {_what(m)}, which rank(s) {', '.join(map(str, m['issued_by']))} issued "
                            "and wait on")
        for m in g["mismatched"][:1]:
            calls = "; ".join(f"rank {r}: {_what(c)}" for r, c in m["calls"].items())
            verdicts.append(f"{name}: collective #{m['seq']} differs between ranks ({calls})")
    lines.append(f"Flight Recorder dumps of {len(result['ranks'])} rank(s) (format {result['version']})")
    lines += verdicts or ["every rank issued the same collectives on every process group"]
    for g in result["groups"]:
        lines.append(f"process group {g['group']}" + (f" ({g['desc']})" if g["desc"] else "")
                     + f": ranks {', '.join(map(str, g['ranks']))}")
        for r in g["ranks"]:
            lines.append(f"  rank {r}: last enqueued {_seq(g['last_enqueued'][r])}, last completed "
                         f"{_seq(g['last_completed'][r])}")
        for m in g["missing"]:
            lines.append(f"  missing #{m['seq']} {_what(m)} on rank(s) {', '.join(map(str, m['missing_ranks']))}")
        for m in g["mismatched"]:
            lines.append(f"  mismatched #{m['seq']}: "
                         + "; ".join(f"rank {r} {_what(c)}" for r, c in m["calls"].items()))
    return lines

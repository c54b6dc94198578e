"""An elastic run's directory (docs/ELASTIC.md): its manifest checked, each generation's traces, the work redone."""
from __future__ import annotations

import json
import re
import warnings
from contextlib import contextmanager
from pathlib import Path

from viewer.errors import TraceError, TruncatedTraceWarning
from viewer.io.files import trace_files

MANIFEST = "elastic.json"
KINDS = ("lost", "added")
ENDS = ("failure", "hosts_updated", "done", "below_min_np", None)
RESET_TIMES = ("last_commit_epoch_ns", "failed_epoch_ns", "detected_epoch_ns", "relaunched_epoch_ns",
               "reformed_epoch_ns", "restored_epoch_ns", "first_step_end_epoch_ns")
STOPPED = ("failure", "below_min_np")   # the ends of a generation whose world the driver stopped
_GEN_DIR = re.compile(r"gen-(\d+)$")


class ElasticWarning(UserWarning):
    """Something in an elastic run's directory that was not loaded (a generation elastic.json omits)."""


def is_elastic(path) -> bool:
    """True for a directory holding ``elastic.json``."""
    p = Path(path)
    return p.is_dir() and (p / MANIFEST).is_file()


def generation_dir(run_dir, generation: int) -> Path:
    return Path(run_dir) / f"gen-{generation:03d}"


def _int(v) -> bool:
    return v.__class__ is int


def read_manifest(run_dir) -> dict:
    """``elastic.json`` checked field by field; a problem raises :class:`TraceError` naming the file."""
    f = Path(run_dir) / MANIFEST
    try:
        data = json.loads(f.read_bytes())
    except OSError as exc:
        raise TraceError(f, f"cannot read ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        where = f" (line {exc.lineno} column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        raise TraceError(f, f"not valid JSON{where}: an elastic run's manifest (docs/ELASTIC.md)") from None

    def ints_or_null(obj: dict, where: str, keys, what: str = "an integer") -> None:
        for k in keys:
            if obj.get(k) is not None and not _int(obj[k]):
                raise TraceError(f, f"{where}: \"{k}\" must be {what} or null")

    if not isinstance(data, dict) or data.get("elastic_format") != 1:
        raise TraceError(f, "not an elastic run manifest: expected an object with \"elastic_format\": 1")
    gens = data.get("generations")
    if not isinstance(gens, list) or not gens:
        raise TraceError(f, "\"generations\" must be a non-empty list")
    seen = set()
    for i, g in enumerate(gens):
        where = f"generations[{i}]"
        if not isinstance(g, dict) or not _int(g.get("generation")) or g["generation"] < 0:
            raise TraceError(f, f"{where}: \"generation\" must be a non-negative integer")
        if g["generation"] in seen:
            raise TraceError(f, f"{where}: generation {g['generation']} is listed twice")
        seen.add(g["generation"])
        if not _int(g.get("size")) or g["size"] < 1:
            raise TraceError(f, f"{where}: \"size\" must be a positive integer")
        ints_or_null(g, where, ("start_epoch_ns", "end_epoch_ns", "step_base"))
        if not _int(g.get("start_epoch_ns")):
            raise TraceError(f, f"{where}: \"start_epoch_ns\" is missing")
        if g.get("end") not in ENDS:
            raise TraceError(f, f"{where}: \"end\" is {g.get('end')!r}, expected one of failure, hosts_updated, done, "
                      "below_min_np")
    resets = data.get("resets", [])
    if not isinstance(resets, list):
        raise TraceError(f, "\"resets\" must be a list")
    for i, r in enumerate(resets):
        where = f"resets[{i}]"
        if not isinstance(r, dict):
            raise TraceError(f, f"{where}: must be an object")
        for k in ("generation_before", "generation_after"):
            if r.get(k) not in seen:
                raise TraceError(f, f"{where}: \"{k}\" ({r.get(k)!r}) is not a generation listed in \"generations\"")
        if r.get("kind") not in KINDS:
            raise TraceError(f, f"{where}: \"kind\" is {r.get('kind')!r}, expected \"lost\" or \"added\"")
        ints_or_null(r, where, RESET_TIMES, "an integer (ns since the epoch)")
        if not _int(r.get("failed_epoch_ns")):
            raise TraceError(f, f"{where}: \"failed_epoch_ns\" is missing")
        ints_or_null(r, where, ("size_before", "size_after", "last_commit_step"))
        for k in ("lost", "added"):
            if not isinstance(r.get(k, []), list):
                raise TraceError(f, f"{where}: \"{k}\" must be a list")
    gens = sorted(gens, key=lambda g: g["generation"])
    return {**data, "generations": gens, "resets": sorted(resets, key=lambda r: r["failed_epoch_ns"]),
            "file": str(f)}


def generation_files(run_dir, manifest: dict) -> list[tuple[int, list[Path]]]:
    """``[(generation, its trace files)]``; a ``gen-*`` directory elastic.json does not list is warned of."""
    listed = {g["generation"] for g in manifest["generations"]}
    out = []
    for g in manifest["generations"]:
        d = generation_dir(run_dir, g["generation"])
        if not d.is_dir():
            raise TraceError(d, f"generation {g['generation']} is listed in {MANIFEST} but its directory is missing")
        files = trace_files(d)
        if not files:
            raise TraceError(d, f"generation {g['generation']} holds no trace files (*.json, *.json.gz)")
        out.append((g["generation"], files))
    for d in sorted(Path(run_dir).iterdir()):
        m = _GEN_DIR.match(d.name)
        if d.is_dir() and m and int(m.group(1)) not in listed:
            warnings.warn(ElasticWarning(f"{d}: not listed in {Path(run_dir) / MANIFEST}; not loaded"),
                          stacklevel=3)
    return out


@contextmanager
def stopped_world(gen: dict, cut: list):
    """In a generation the driver stopped, its traces' "unfinished trace" warnings go into ``cut``."""
    if gen.get("end") not in STOPPED:
        yield
        return

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for w in caught:
        if issubclass(w.category, TruncatedTraceWarning) and ": unfinished trace" in str(w.message):
            cut.append(str(w.message).split(": unfinished trace")[0])
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


class Members:
    """The trace files of an elastic run's generations, parsed as members of their generation."""

    def __init__(self, run_dir, manifest: dict):
        self.run_dir = run_dir
        self.gens = {g["generation"]: g for g in manifest["generations"]}
        self.generation = {f: g for g, fs in generation_files(run_dir, manifest) for f in fs}
        gens = manifest["generations"]   # the first step a later generation ran again: redone here
        self.redone = {g["generation"]: int(n["step_base"]) for g, n in zip(gens, gens[1:])
                       if n.get("step_base") is not None}
        self.cut: dict = {g: [] for g in self.gens}

    def parse(self, parse, f: Path):
        """``parse(f)`` marked with its generation; a stopped world's trace with no events: None."""
        g = self.generation[f]
        with stopped_world(self.gens[g], self.cut[g]):
            try:
                p = parse(f)
            except TraceError as exc:
                if self.gens[g].get("end") not in STOPPED or not exc.problem.startswith("no trace events"):
                    raise
                warnings.warn(ElasticWarning(f"{f}: no trace events: the driver stopped generation {g} before "
                                             "this rank wrote any; left out"), stacklevel=3)
                return None
        p["rank_info"]["generation"] = g
        mark_redone(p, self.redone.get(g))
        return p

    def report(self) -> None:
        """One line per stopped generation whose traces were never closed (all their events read)."""
        for g, cut in self.cut.items():
            if cut:
                warnings.warn(ElasticWarning(
                    f"{generation_dir(self.run_dir, g)}: {len(cut)} trace(s) unclosed, as expected: the driver "
                    f"stopped generation {g} after its {self.gens[g]['end']}; every recorded event was read"),
                    stacklevel=3)


def mark_redone(parsed: dict, first_redone: int | None) -> None:
    """Leave the ops of steps a later generation redid out of one file's step tables (events: step -1)."""
    if first_redone is None:
        return
    for t in ("tensor_ops", "fused_ops", "readiness"):
        df = parsed[t]
        if len(df):
            parsed[t] = df[df["step"] < first_redone].reset_index(drop=True)
    ev = parsed["events"]
    if len(ev):   # a new column: a cached table's arrays are read-only
        ev["step"] = ev["step"].where(ev["step"] < first_redone, -1)


def continue_occurrences(parsed: list[dict]) -> None:
    """Number each (rank, tensor)'s ops on from the previous generations' (each world restarts at 0)."""
    for t in ("tensor_ops", "readiness"):
        count: dict = {}
        for p in parsed:
            df = p[t]
            if not len(df):
                continue
            keys = list(zip(df["rank"].tolist(), df["tensor"].tolist()))
            base = [count.get(k, 0) for k in keys]
            df["occurrence"] = df["occurrence"].to_numpy() + base
            for k, o in zip(keys, df["occurrence"].tolist()):
                count[k] = max(count.get(k, 0), o + 1)


def run_meta(meta: dict, manifest: dict, ranks) -> None:
    """Set ``meta["elastic"]`` (generations on the run's axis), ``size`` and the last world's ``truncated_ranks``."""
    origin = meta.get("origin_epoch_ns") or 0
    gens = []
    for g in manifest["generations"]:
        mine = ranks[ranks["generation"] == g["generation"]]
        end = g.get("end_epoch_ns")
        gens.append({**g, "ranks": sorted(int(r) for r in mine["rank"]),
                     "truncated_ranks": sorted(int(r) for r in mine.loc[mine["truncated"].astype(bool), "rank"]),
                     "start_ns": g["start_epoch_ns"] - origin, "end_ns": None if end is None else end - origin})
    meta["elastic"] = {"file": manifest["file"], "min_np": manifest.get("min_np"), "max_np": manifest.get("max_np"),
                       "generations": gens, "resets": manifest["resets"]}
    meta["size"] = min(g["size"] for g in gens)
    meta["ranks_loaded"] = sorted({int(r) for r in ranks["rank"]})
    meta["truncated_ranks"] = gens[-1]["truncated_ranks"]

"""Paths the in-app picker may open: only inside the trace root, never through ``..``, an absolute
path, or a symlink that leads outside (the path itself, or any file the loader would read in it)."""
from __future__ import annotations

import os
from pathlib import Path

from viewer.cache import CACHE_DIRNAME
from viewer.io import files as io_files

TRACE_SUFFIXES = (*io_files.TRACE_SUFFIXES, ".sqlite")   # and Nsight exports


class PathRefused(ValueError):
    """A picker path outside the trace root (the message says why, in one line)."""


def resolve_under(root, rel: str) -> Path:
    """The real path of ``rel`` inside ``root``; raises PathRefused when it is not confined there."""
    root = Path(root).resolve()
    rel = (rel or "").strip()
    if not rel:
        raise PathRefused("no path given")
    if rel.startswith(("/", "\\", "~")) or os.path.isabs(rel) or (len(rel) > 1 and rel[1] == ":"):
        raise PathRefused(f"{rel}: absolute paths are refused; give a path inside the trace root")
    parts = Path(rel.replace("\\", "/")).parts
    if ".." in parts:
        raise PathRefused(f"{rel}: '..' is refused; the picker stays inside the trace root")
    target = root.joinpath(*parts)
    if not os.path.lexists(target):
        raise PathRefused(f"{rel}: no such file or directory under the trace root")
    real = _real(target)
    if real is None:
        raise PathRefused(f"{rel}: a symlink loop; refused")
    if not _inside(root, real):
        raise PathRefused(f"{rel}: a symlink leads outside the trace root; refused")
    _check_reads(root, real, rel)
    return real


def _real(path: Path):
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # a symlink loop
        return None


def _inside(root: Path, real) -> bool:
    return real is not None and (real == root or root in real.parents)


def _check_reads(root: Path, real: Path, rel: str) -> None:
    """Refuse when a file the loader would read for ``real`` (the trace files of a run directory, an elastic
    run's gen-*/, the parse caches) resolves outside ``root``: the loader follows links."""
    folder = real if real.is_dir() else real.parent
    where = rel.rstrip("/") if real.is_dir() else rel.rsplit("/", 1)[0] if "/" in rel else "."
    entries = [e for e in folder.iterdir() if is_trace_file(e.name)] if real.is_dir() else []
    folders = [folder]
    if real.is_dir() and (folder / "elastic.json").is_file():   # an elastic run reads its gen-*/ too
        gens = [e for e in folder.iterdir() if e.name.startswith("gen-")]
        entries += gens
        for g in gens:
            if _inside(root, _real(g)) and g.is_dir():
                entries += [e for e in g.iterdir() if is_trace_file(e.name)]
                folders.append(g)
    for f in folders:
        cache = f / CACHE_DIRNAME
        if os.path.lexists(cache):
            entries.append(cache)
            if _inside(root, _real(cache)) and cache.is_dir():
                for sub in cache.iterdir():
                    entries.append(sub)
                    if sub.is_dir():
                        entries.extend(sub.iterdir())
    for entry in entries:
        if not _inside(root, _real(entry)):
            name = entry.relative_to(folder).as_posix()
            raise PathRefused(f"{where}/{name}: a symlink leads outside the trace root; refused")


def is_trace_file(name: str) -> bool:
    return name.endswith(TRACE_SUFFIXES)


def list_runs(root, max_depth: int = 3, limit: int = 200) -> list[str]:
    """Run directories under ``root`` (relative, '/'-separated) that hold trace files."""
    root = Path(root).resolve()
    found = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        depth = len(here.relative_to(root).parts)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and
                             not (here / d).is_symlink()) if depth < max_depth else []
        if any(is_trace_file(f) for f in filenames):
            found.append(here.relative_to(root).as_posix() or ".")
            if len(found) >= limit:
                break
    return sorted(found)

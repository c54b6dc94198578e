"""The parse stage on a Dask cluster (``RINGSCOPE_SCHEDULER``, ``summarize --scheduler``): each trace file parsed by a
worker into the run's store, as :mod:`viewer.parse`'s worker processes do on one machine (docs/CLUSTER.md). The
workers read the traces and write the store at the paths this machine sees: both on storage they share."""
from __future__ import annotations

import logging
import os
import tempfile
import threading
from pathlib import Path

from viewer import cache as _cache
from viewer.errors import TraceError

ENV = "RINGSCOPE_SCHEDULER"   # a scheduler's address (tcp://host:8786), or "local": a cluster on this machine
CONNECT_S = 20
_ONE_PARSE = threading.Lock()


def scheduler() -> str | None:
    """The Dask scheduler the parse runs on, or None: parse on this machine."""
    return os.environ.get(ENV, "").strip() or None


def parse_on_cluster(files: list[Path], address: str, progress, store: Path | None, parse_into, collect):
    """(kept indices, parsed tables, bad (path, problem)) as ``viewer.parse`` gives them, each file parsed on the
    cluster by ``parse_into(file, dest, i)`` (``viewer.parse``'s worker function: the same tables and Parquet), the
    results gathered by ``collect`` (``viewer.parse.collect``)."""
    try:
        from distributed import Client, LocalCluster
    except ModuleNotFoundError as exc:   # the CLI turns it into its one line; a notebook reads the fix here
        raise ModuleNotFoundError(f"{ENV} is set: parsing on a Dask cluster needs pip install 'ringscope[cluster]'",
                                  name=exc.name) from None

    # its start-up lines and a local cluster's shutdown ("killing" a worker slow to stop) are not the command's
    # output; what fails the parse is one line of ours
    logging.getLogger("distributed").setLevel(logging.ERROR)
    cluster = None
    try:
        if address == "local":
            cluster = LocalCluster(n_workers=max(1, min(len(os.sched_getaffinity(0)), len(files))),
                                   threads_per_worker=1, processes=True, dashboard_address=None)
            address = cluster.scheduler_address
        client = Client(address, timeout=f"{CONNECT_S}s")
    except (OSError, TimeoutError, ValueError) as exc:   # ValueError: an address Dask cannot read
        if cluster is not None:
            cluster.close()
        raise TraceError(address, f"cannot reach the Dask scheduler ({exc}); start one or unset {ENV}") from None
    # the shared directory the workers write into: the store, else a scratch one beside it (not this machine's /tmp)
    dest = store if store is not None else Path(tempfile.mkdtemp(prefix=".parse-", dir=_scratch_root(files)))
    try:
        _same_code(client, address)
        n = len(files)
        futures = client.map(_one_at_a_time, [parse_into] * n, [str(f) for f in files], [str(dest)] * n, range(n),
                             cwd=os.getcwd(), pure=False)
        return _gather(files, futures, dest, store, progress, collect)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
        if store is None:
            _cache.discard(dest)


def _one_at_a_time(parse_into, f: str, dest: str, i: int, cwd: str):
    """``parse_into`` in a worker, one parse at a time per worker process: it records warnings process-wide
    (``warnings.catch_warnings``), so two threads' parses would mix theirs (and the parse holds the GIL anyway).
    Relative paths are this machine's: resolved from its working directory (shared storage), and kept as written,
    as the tables and warnings name the files."""
    with _ONE_PARSE:
        here = os.getcwd()
        if cwd != here:
            os.chdir(cwd)
        try:
            return parse_into(f, dest, i)
        finally:
            if cwd != here:
                os.chdir(here)


def _gather(files, futures, dest: Path, store: Path | None, progress, collect):
    """``collect`` (:func:`viewer.parse.collect`) of the futures' results, a worker's or a path's failure as one
    line."""
    from distributed import KilledWorker

    def results():
        for f, fut in zip(files, futures):
            try:
                yield fut.result()
            except KilledWorker as exc:   # the parse took its workers down (memory?) on several tries
                raise TraceError(f, f"the Dask workers that parsed it died ({exc})") from None
            fut.release()

    try:
        return collect(files, results(), dest, store, progress)
    except OSError as exc:
        raise TraceError(dest, f"a Dask worker or this machine cannot use it ({exc.strerror or exc}): the traces "
                         "and the store must be on storage every worker sees at the same path") from None


def _same_code(client, address: str) -> None:
    """Refuse workers whose ringscope differs from this one's: their tables would not be this version's."""
    here = _cache.cache_version()
    theirs = client.run(_cache.cache_version)
    if not theirs:
        raise TraceError(address, "the Dask scheduler has no workers")
    other = sorted(v for v in theirs.values() if v != here)
    if other:
        raise TraceError(address, f"{len(other)} of {len(theirs)} Dask worker(s) run other ringscope code (digest "
                         f"{other[0]}, here {here}): install this ringscope on them")


def _scratch_root(files: list[Path]) -> Path:
    root = _cache.cache_root(files[0])
    root.mkdir(parents=True, exist_ok=True)
    return root

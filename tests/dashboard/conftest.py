"""Shared fixtures of the dashboard tests: real runs to show, and a served dashboard in Chromium."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
HOROVOD = SHARED / "horovod_timelines"
SAMPLES = REPO / "sample_traces"
CHROMIUM = os.environ.get("RINGSCOPE_CHROMIUM", "/usr/bin/chromium")


def horovod_file(name: str) -> Path:
    path = HOROVOD / name
    if not path.exists():
        pytest.skip(f"real Horovod timeline {path} is absent (../shared not mounted)")
    return path


def sample_run(name: str):
    """sample_traces/<name> when the viewer engineer's real sample runs exist, else None."""
    path = SAMPLES / name
    if path.is_dir() and any(path.glob("*.json*")):
        return path
    return None


def replicated_run(out: Path, ranks: int, events_per_rank: int, name: str = "straggler"):
    """A big real run: sample_traces/<name> (rank 3 is the planted straggler) replicated in time by
    bench/tracegen to ``ranks`` x ``events_per_rank`` events, loaded; returns its tables."""
    import gzip

    from bench import tracegen
    from viewer import Run

    src = out / "src"
    src.mkdir(parents=True, exist_ok=True)
    for f in sorted((SAMPLES / name).glob("rank-*.json.gz")):
        (src / f.name[:-3]).write_bytes(gzip.decompress(f.read_bytes()))
    tracegen.build(src, out / "run", ranks, events_per_rank)
    return Run.load(out / "run", cache=False).tables


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A dashboard process on 127.0.0.1 (``argv`` after the interpreter), up within ``timeout`` s, stopped by
    ``stop()``."""

    def __init__(self, argv: list, port: int, log: Path, timeout: float = 120):
        self.port, self.url, self.log = port, f"http://127.0.0.1:{port}/", log
        self._log = open(log, "w")
        self.proc = subprocess.Popen([sys.executable, *argv], cwd=REPO, stdout=self._log,
                                     stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"dashboard exited early:\n{log.read_text()[-2000:]}")
            try:
                urllib.request.urlopen(self.url, timeout=2)
                return
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"dashboard did not come up:\n{log.read_text()[-2000:]}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


def grid_rows(page, grid_id: str):
    """The shown page of an AG Grid as ``[{header: cell text}]`` in row order (None when absent)."""
    return page.evaluate("""(id) => {
        const g = document.getElementById(id);
        if (!g) return null;
        const cols = Array.from(g.querySelectorAll('.ag-header-cell[col-id]'))
            .map(h => [h.getAttribute('col-id'), h.innerText.trim()]);
        return Array.from(g.querySelectorAll('.ag-center-cols-container .ag-row'))
            .sort((a, b) => a.getAttribute('row-index') - b.getAttribute('row-index'))
            .map(r => Object.fromEntries(cols.map(([c, h]) => [h, (r.querySelector(`.ag-cell[col-id="${c}"]`)
                                                                  || {}).innerText])));
    }""", grid_id)


# every run the shared server holds: the samples, then the shared Horovod timelines and Kineto traces
EVERY_RUN = sorted(p for p in SAMPLES.iterdir() if p.is_dir() and any(p.glob("*.json*")))
if SHARED.is_dir():
    EVERY_RUN += sorted((SHARED / "horovod_timelines").glob("*.json")) + sorted(
        p for p in (SHARED / "kineto_traces").iterdir() if p.is_dir())


@pytest.fixture(scope="session")
def every_run_server(tmp_path_factory):
    """One dashboard over EVERY_RUN for the modules that check each run; ``ids``: each path's run id."""
    port = free_port()
    argv = ["-m", "viewer.cli", "view", *map(str, EVERY_RUN), "--port", str(port), "--root", str(REPO)]
    srv = Server(argv, port, tmp_path_factory.mktemp("every-run") / "log", timeout=300)
    srv.ids = {p: f"run{i + 1}" for i, p in enumerate(EVERY_RUN)}
    yield srv
    srv.stop()


def launch_argv(main_run, second_run, root, port: int) -> list:
    """``ringscope view MAIN SECOND`` (upload limit 1 MB)."""
    runs = [str(p) for p in (main_run, second_run) if p is not None]
    return ["-m", "viewer.cli", "view", *runs, "--port", str(port), "--root", str(root), "--max-upload-mb", "1"]


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory) -> Path:
    """Where screenshots go: $RINGSCOPE_ARTIFACTS/dashboard when set, else the session's tmp dir."""
    if not os.environ.get("RINGSCOPE_ARTIFACTS"):
        return tmp_path_factory.mktemp("artifacts")
    path = Path(os.environ["RINGSCOPE_ARTIFACTS"]) / "dashboard"
    path.mkdir(parents=True, exist_ok=True)
    return path


# Module scope: a live sync_playwright() keeps its asyncio loop running, and other test packages
# (the Perfetto checks) start their own sync_playwright() afterwards.
@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is absent: install Debian chromium (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--disable-background-networking", "--no-first-run"])
        yield b
        b.close()


@pytest.fixture
def page(browser):
    """A fresh page (own context = fresh profile) that records console errors in ``page.errors``."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    pg.errors = []
    pg.on("console", lambda m: pg.errors.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: pg.errors.append(f"page error: {e}"))
    yield pg
    context.close()

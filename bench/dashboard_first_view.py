"""Time to first view of a 1M-event run in the dashboard, in headless Chromium, and bytes sent.

Serves a real run (sample_traces/straggler, 4 ranks) replicated in time by ``bench/tracegen`` to the
event count (with ``--ranks N``: sample_traces/healthy's ranks replicated to N, eight a host, a straggler planted
at rank 2N/3), loaded before the server comes up, on 127.0.0.1, opens it in /usr/bin/chromium through
playwright, and prints (does not assert):

- server: seconds to build the tables and come up (not part of the view);
- overview: seconds from navigation until the headline cards show (the first frame after they are in the page, on
  the page's clock); the rank x step heatmap after them (likewise); the
  first outlier listed (with ``--ranks``: the planted straggler's rank is printed beside it);
- timeline: seconds from the tab click until the aggregated timeline is drawn (this includes the
  server building its timeline index on first use), and the bars drawn;
- zoom: seconds for a zoomed redraw;
- bytes: response bytes the browser received in total and for the timeline's callbacks.

Usage: .venv/bin/python bench/dashboard_first_view.py [--events 1000000] [--ranks 4] [--chromium /usr/bin/chromium]
"""
from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# the page's own clock (ms from navigation) at the first frame after the cards, and the heatmap, are in the page:
# playwright's wait_for_selector answers only when the page's thread is free, which plotly.js's evaluation right
# after the cards can hold for a second
PAINTED = """window.__painted = {};
new MutationObserver(() => {
  for (const [key, sel] of [['cards', '#card-step .card-value'], ['heatmap', '#ov-heatmap .main-svg .hm']]) {
    if (!(key in window.__painted) && document.querySelector(sel)) {
      window.__painted[key] = null;
      requestAnimationFrame(() => { window.__painted[key] = performance.now(); });
    }
  }
}).observe(document, {childList: true, subtree: true});"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(events: int, port: int, ranks: int, work: str):
    """The server, up: 4 ranks are the straggler sample stretched in time; more are the healthy sample's ranks
    replicated, eight a host, with a straggler planted at rank 2N/3 (``planted``)."""
    name, planted = ("straggler", "None") if ranks == 4 else ("healthy", str(2 * ranks // 3))
    code = ("import gzip\nfrom pathlib import Path\nfrom bench import tracegen\nfrom viewer import Run\n"
            f"from viewer.dashboard.serve import serve\nsrc = Path({work!r})\n"
            f"for f in sorted(Path('sample_traces/{name}').glob('rank-*.json.gz')):\n"
            "    (src / f.name[:-3]).write_bytes(gzip.decompress(f.read_bytes()))\n"
            f"tracegen.build(src, src / 'run', {ranks}, {events} // {ranks}, straggler={planted}, "
            f"ranks_per_host={None if ranks == 4 else 8})\n"
            f"serve(port={port}, tables=Run.load(src / 'run', cache=False).tables, label='{name}-{events}')\n")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    t = time.perf_counter()
    while time.perf_counter() - t < 300 + ranks:   # many ranks: the run is built and loaded first
        if proc.poll() is not None:
            raise SystemExit("dashboard exited before it came up")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2)
            return proc, time.perf_counter() - t
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"dashboard did not come up in {300 + ranks} s")


def measure(events: int, chromium: str, ranks: int = 4) -> dict:
    from playwright.sync_api import sync_playwright

    port = _free_port()
    work = tempfile.TemporaryDirectory()   # the run's files, gone with the measurement
    proc, up_s = _start(events, port, ranks, work.name)
    sizes = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=[
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--no-first-run"])
            page = browser.new_page(viewport={"width": 1400, "height": 1000})

            def on_finished(req):
                try:
                    body = req.sizes()["responseBodySize"]
                except Exception:
                    body = 0
                sizes.append((req.url, req.post_data or "", body))

            page.on("requestfinished", on_finished)
            page.add_init_script(PAINTED)
            page.goto(f"http://127.0.0.1:{port}/")
            page.wait_for_selector("#card-step .card-value", timeout=120_000)
            page.wait_for_selector("#ov-heatmap .main-svg .hm", timeout=120_000, state="attached")
            painted = page.evaluate("() => window.__painted")
            overview_s, heatmap_s = painted["cards"] / 1e3, (painted["heatmap"] - painted["cards"]) / 1e3
            first = page.locator("#ov-outliers .outliers .outlier").first   # the first metric's worst rank
            top_outlier = int(first.inner_text().split(":")[0].split()[1]) if first.count() else None
            n_before = len(sizes)
            t = time.perf_counter()
            page.click("#tab-timeline")
            page.wait_for_selector("#tl-graph .main-svg .barlayer .point", timeout=120_000, state="attached")
            timeline_s = time.perf_counter() - t
            # _fullData: the bars' arrays decoded (data holds them as sent, base64 typed arrays)
            bars = page.evaluate("() => document.querySelector('#tl-graph .js-plotly-plot')._fullData"
                                 ".reduce((n, t) => n + (t.type === 'bar' ? t.base.length : 0), 0)")
            title = page.evaluate("() => document.querySelector('#tl-graph .js-plotly-plot').layout.title.text")
            lanes = page.evaluate("() => document.querySelector('#tl-graph .js-plotly-plot').layout.yaxis"
                                  ".categoryarray.length")
            tl_bytes = sum(b for u, d, b in sizes[n_before:] if "tl-graph" in d)
            t = time.perf_counter()
            box = page.locator("#tl-graph .nsewdrag").first.bounding_box()  # drag-zoom a few pixels wide
            y = box["y"] + box["height"] / 2
            page.mouse.move(box["x"] + box["width"] * 0.40, y)
            page.mouse.down()
            page.mouse.move(box["x"] + box["width"] * 0.42, y, steps=5)
            page.mouse.up()
            page.wait_for_function("() => document.querySelector('#tl-graph .js-plotly-plot').layout.title.text"
                                   f" !== {json.dumps(title)}", timeout=120_000)
            zoom_s = time.perf_counter() - t
            browser.close()
    finally:
        proc.terminate()
        proc.wait(10)
        work.cleanup()
    return {"events": events, "ranks": ranks, "planted": 2 * ranks // 3 if ranks != 4 else 3,
            "server_up_s": round(up_s, 2), "overview_s": round(overview_s, 2),
            "heatmap_after_overview_s": round(heatmap_s, 2), "top_outlier": top_outlier,
            "timeline_first_view_s": round(timeline_s, 2), "timeline_bars": bars, "timeline_lanes": lanes,
            "timeline_title": title, "zoom_redraw_s": round(zoom_s, 2),
            "timeline_callback_bytes": tl_bytes, "total_bytes": sum(b for _, _, b in sizes)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000, help="events in all")
    ap.add_argument("--ranks", type=int, default=4, help="4: the straggler sample; more: the healthy sample's "
                    "ranks replicated, a straggler planted at 2N/3")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    result = measure(args.events, args.chromium, args.ranks)
    if args.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:>26}: {v:,}" if isinstance(v, int) else f"{k:>26}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

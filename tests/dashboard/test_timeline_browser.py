"""The timeline's controls in real headless Chromium on sample_traces/straggler: a click on a rank's lane shows its
threads, and "Open in Perfetto" downloads the ranks and window shown as a Chrome trace."""
from __future__ import annotations

import json

import pytest

from tests.dashboard.conftest import SAMPLES, Server, free_port, launch_argv
from viewer import Run
from viewer.dashboard.timeline_agg import RANK

LANES = "() => Array.from(document.querySelector('#tl-graph .js-plotly-plot').layout.yaxis.categoryarray)"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    port = free_port()
    srv = Server(launch_argv(SAMPLES / "straggler", None, SAMPLES, port), port,
                 tmp_path_factory.mktemp("srv") / "log")
    yield srv
    srv.stop()


def test_click_a_lane_for_its_threads_then_download_the_window(server, page, artifacts):
    page.goto(server.url)
    page.wait_for_selector("#card-straggler .card-value", timeout=60_000)
    page.click("#tab-timeline")
    page.wait_for_selector("#tl-graph .main-svg .barlayer .point", timeout=30_000, state="attached")
    assert page.evaluate(LANES)[::-1] == [f"r{r} {RANK}" for r in range(4)]
    drawn = page.evaluate("() => document.querySelector('#tl-graph .main-svg').parentNode.textContent")
    assert "r3 \u25b8 · late" in drawn and "step 1" in drawn   # the late rank's label, the steps on the axis
    page.evaluate("""() => {   // a click on rank 1's lane, as plotly reports it
        const gd = document.querySelector('#tl-graph .js-plotly-plot');
        gd.emit('plotly_click', {points: [{y: 'r1 \u25b8', x: 100}]});
    }""")
    page.wait_for_function(LANES + ".includes('r1 framework')", timeout=30_000)
    assert f"r0 {RANK}" in page.evaluate(LANES) and "rank 1" in page.inner_text("#tl-expand")
    page.screenshot(path=str(artifacts / "timeline-rank-expanded.png"), full_page=True)
    page.fill("#tl-step", "1")
    page.wait_for_function("() => document.querySelector('#tl-graph .js-plotly-plot').layout.xaxis.range[0] > 100",
                           timeout=30_000)
    lo, hi = page.evaluate("() => document.querySelector('#tl-graph .js-plotly-plot').layout.xaxis.range")
    with page.expect_download(timeout=30_000) as dl:
        page.click("#tl-perfetto")
    trace = json.loads(open(dl.value.path()).read())
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert spans and {e["pid"] for e in spans} == {0, 1, 2, 3}
    origin_ms = Run.load(SAMPLES / "straggler").events["t_ns"].min() / 1e6   # 0 on the dashboard's axis
    assert all(e["ts"] / 1e3 - origin_ms <= hi + 1e-3 and (e["ts"] + e["dur"]) / 1e3 - origin_ms >= lo - 1e-3
               for e in spans)   # step 1's window, as drawn
    assert 1 in {e["args"].get("step") for e in spans if e["name"] == "STEP"}
    assert page.errors == []

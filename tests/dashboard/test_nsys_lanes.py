"""Nsight GPU lanes on the timeline: ``ringscope view RUN --nsys ...`` in headless Chromium.

The exports are tests.nsys.fixture's synthetic SQLite files (the nsys schema, no real GPU here),
built from the real sample_traces/healthy run.
"""
from __future__ import annotations

import gzip

import pytest

from tests.dashboard.conftest import SAMPLES, Server, free_port
from tests.dashboard.test_browser import plot_data


@pytest.fixture(scope="module")
def overlaid(tmp_path_factory):
    src = sorted((SAMPLES / "healthy").glob("rank-*.json.gz"))
    if not src:
        pytest.skip("sample_traces/healthy is absent")
    from tests.nsys import fixture

    run = tmp_path_factory.mktemp("healthy_plain")
    for f in src:  # the fixture builder reads plain JSON
        (run / f.name[:-3]).write_bytes(gzip.decompress(f.read_bytes()))
    out = tmp_path_factory.mktemp("nsys")
    fixture.build(sorted(run.glob("rank-*.json")), out)
    return run, sorted(out.glob("*.sqlite"))


def test_gpu_lanes_show_on_the_timeline(overlaid, page, artifacts, tmp_path):
    run, exports = overlaid
    port = free_port()
    argv = ["-m", "viewer.cli", "view", str(run), "--port", str(port)]
    for f in exports:
        argv += ["--nsys", str(f)]
    srv = Server(argv, port, tmp_path / "log")
    try:
        page.goto(srv.url)
        page.wait_for_selector("#card-step .card-value", timeout=60_000)
        assert "Nsight overlay: rank 0" in page.inner_text("#banner")
        page.click("#tab-timeline")
        page.wait_for_selector("#tl-graph .main-svg .barlayer .point", timeout=30_000, state="attached")
        page.fill("#tl-step", "1")
        page.wait_for_function("() => document.querySelector('#tl-graph .js-plotly-plot').data"
                               ".some(t => t.name === 'GPU NCCL')", timeout=30_000)
        # on a rank's one lane the GPU's NCCL kernels lie under the CPU's NCCL span of the same time, so
        # they are not sent, and the legend keeps them; a rank's lane, clicked, opens into its streams
        page.evaluate("""() => {
            const gd = document.querySelector('#tl-graph .js-plotly-plot');
            gd.emit('plotly_click', {points: [{y: 'r0 \u25b8', x: 100}]});
        }""")
        page.wait_for_function("() => document.querySelector('#tl-graph .js-plotly-plot').data"
                               ".some(t => t.name === 'GPU NCCL' && t.y.length > 0)", timeout=30_000)
        data = plot_data(page, "tl-graph")["data"]
        gpu = {y for t in data if t["name"] == "GPU NCCL" for y in t["y"]}
        assert gpu and all(y.startswith("r0 ") and not y.endswith("\u25b8") for y in gpu)   # rank 0's streams
        page.screenshot(path=str(artifacts / "timeline-nsight-gpu-lanes.png"), full_page=True)
        assert page.errors == []
    finally:
        srv.stop()

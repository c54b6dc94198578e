"""An elastic run (docs/ELASTIC.md) in the dashboard, in real headless Chromium: the Overview's Recoveries
table, and each reset as a band across every timeline row with its cause on hover."""
from __future__ import annotations

import warnings

import pytest

from tests.dashboard.conftest import Server, free_port, launch_argv
from tests.viewer.elastic_runs import write_elastic_run
from viewer import units


@pytest.fixture(scope="module")
def elastic_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("elastic-root")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        manifest = write_elastic_run(root / "run")
    port = free_port()
    srv = Server(launch_argv(root / "run", None, root, port), port, tmp_path_factory.mktemp("srv") / "log")
    srv.manifest = manifest
    yield srv
    srv.stop()


def test_recoveries_table_and_reset_band_with_cause_on_hover(elastic_server, page, artifacts):
    page.goto(elastic_server.url)
    page.wait_for_selector("#recoveries-table", timeout=60_000)
    # the first row by header (one reset: the table is pairs, as summarize prints a one-row table)
    cells = dict(zip(page.locator("#recoveries-table th").all_inner_texts(),
                     page.locator("#recoveries-table td").all_inner_texts()))
    exp = elastic_server.manifest["expected"][0]
    assert cells["kind"] == "lost" and cells["ranks"] == "4→3"   # the declared table, as summarize prints it
    assert cells["re-form"] == units.fmt(exp["reform_ms"], "ms")
    assert cells["redone"] == units.fmt(exp["redone_ms"], "ms")
    note = page.inner_text("#overview-body .note >> nth=0")
    assert "killed by signal 9" in note and "biggest part: re-forming the world" in note
    page.screenshot(path=str(artifacts / "elastic-overview.png"), full_page=True)

    page.click("#tab-timeline")
    page.wait_for_selector("#tl-graph .main-svg .barlayer .point", timeout=30_000, state="attached")
    data = page.evaluate("""() => {
        const gd = document.querySelector('#tl-graph .js-plotly-plot');
        const lanes = gd.layout.yaxis.categoryarray;
        const i = gd.data.findIndex(t => t.name === 'reset');
        return {lanes: Array.from(lanes), i: i, y: i < 0 ? [] : Array.from(gd.data[i].y),
                base: i < 0 ? [] : Array.from(gd.data[i].base), x: i < 0 ? [] : Array.from(gd.data[i].x)};
    }""")
    assert data["i"] == 0   # drawn under the spans
    assert set(data["y"]) == set(data["lanes"]) and len(data["y"]) == len(data["lanes"])   # every row
    assert data["x"][0] == pytest.approx(exp["lost_ms"], abs=0.01)
    # hover one row's band: the label names the cause and the parts
    page.evaluate("""() => {
        const gd = document.querySelector('#tl-graph .js-plotly-plot');
        Plotly.Fx.hover(gd, [{curveNumber: 0, pointNumber: 0}]);
    }""")
    page.wait_for_selector("#tl-graph .hoverlayer .hovertext", timeout=10_000)
    text = page.evaluate("() => document.querySelector('#tl-graph .hoverlayer').textContent")
    assert "killed by signal 9" in text and "re-forming" in text and "4 → 3" in text
    page.screenshot(path=str(artifacts / "elastic-timeline.png"), full_page=True)
    assert page.errors == []

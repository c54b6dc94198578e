"""The Breakdown page and the timeline's critical path in real headless Chromium, on runs written by the
real recorder (tests/viewer/phase_runs.py): rank 2's loader slow, and rank 3 late with no phase spans."""
from __future__ import annotations

import pytest

from tests.dashboard.conftest import SAMPLES, Server, free_port, grid_rows, launch_argv
from tests.viewer.phase_runs import write_run
from viewer import vocab


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    d = tmp_path_factory.mktemp("bd")
    main = write_run(d / "slow-data", steps=6, slow={2: {"data_wait": 40}}, noise=0.1, seed=7)
    # a script without wrap_loader/watch (every shipped sample now records its phases)
    second = write_run(d / "straggler", steps=6, phases=False, slow={3: {"forward": 40}}, noise=0.1, seed=8)
    port = free_port()
    srv = Server(launch_argv(main, second, SAMPLES, port), port, d / "log")
    yield srv
    srv.stop()


def _graph(page, gid):
    return page.evaluate(f"""() => {{
        const gd = document.querySelector('#{gid} .js-plotly-plot');
        return gd.data.map(t => ({{name: t.name, x: Array.from(t.x || []), y: Array.from(t.y || [])}}));
    }}""")


def test_breakdown_page_names_the_cause(server, page, artifacts):
    page.goto(server.url)
    page.wait_for_selector("#card-straggler .card-value", timeout=60_000)
    page.click("#tab-breakdown")
    page.wait_for_selector("#bd-rank-table", timeout=30_000, state="attached")
    page.wait_for_selector("#bd-bars .barlayer .point", timeout=30_000)
    bars = {t["name"]: t for t in _graph(page, "bd-bars")}
    assert {p.label for p in vocab.PHASES} <= set(bars)   # a bar segment per phase of the one phase table
    dw = dict(zip(bars["data wait"]["x"], bars["data wait"]["y"]))
    assert "rank 2" in dw, bars["data wait"]
    assert dw["rank 2"] > 35 and all(v < 5 for k, v in dw.items() if k != "rank 2")
    causes = page.inner_text("#bd-rootcause")
    assert "rank 2" in causes and "data wait" in causes and "loader workers" in causes
    cells = [v for row in grid_rows(page, "bd-rank-table") for v in row.values()]
    assert cells and "?" not in cells   # every phase known
    page.screenshot(path=str(artifacts / "page-breakdown.png"), full_page=True)
    assert page.errors == []


def test_critical_path_toggle_highlights_the_late_rank(server, page, artifacts):
    page.goto(server.url)
    page.wait_for_selector("#card-straggler .card-value", timeout=60_000)
    page.click("#tab-timeline")
    page.wait_for_selector("#tl-graph .main-svg .barlayer .point", timeout=30_000, state="attached")
    assert "critical path" not in {t["name"] for t in _graph(page, "tl-graph")}
    page.click("#tl-critical input[type=checkbox]")
    page.wait_for_function("""() => {
        const gd = document.querySelector('#tl-graph .js-plotly-plot');
        return gd && gd.data && gd.data.some(t => t.name === 'critical path');
    }""", timeout=30_000)
    traces = {t["name"]: t for t in _graph(page, "tl-graph")}
    lanes = {y for y in traces["critical path"]["y"] if y}
    # the late rank's phases and the negotiation it closed (its threads shown), then the collective (on its
    # fusion thread, or on another rank's one lane) and wait
    assert "r2 framework ·1" in lanes and "r2 tensor ·1" in lanes
    assert any(lane.endswith(("fusion", "\u25b8")) for lane in lanes)
    assert set(traces["slowest phase"]["y"]) == {"r2 framework ·1"}
    page.screenshot(path=str(artifacts / "timeline-critical-path.png"), full_page=True)
    page.click("#tl-critical input[type=checkbox]")
    page.wait_for_function("""() => {
        const gd = document.querySelector('#tl-graph .js-plotly-plot');
        return gd && gd.data && !gd.data.some(t => t.name === 'critical path');
    }""", timeout=30_000)
    assert page.errors == []


def test_run_without_phases_says_unknown(server, page):
    page.goto(server.url)
    page.wait_for_selector("#card-straggler .card-value", timeout=60_000)
    page.click("#run-a")
    page.get_by_role("option", name="straggler (run2)").click()
    page.click("#tab-breakdown")
    page.wait_for_function("() => Array.from(document.querySelectorAll('#bd-rank-table .ag-cell'))"
                           ".some(td => td.innerText === '?')", timeout=30_000)   # the declared unknown marker
    names = {t["name"] for t in _graph(page, "bd-bars")}
    assert "phases unknown" in names
    assert "phases are unknown" in page.inner_text("#bd-rootcause")
    assert page.errors == []

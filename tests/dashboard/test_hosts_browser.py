"""Hosts on the dashboard in real headless Chromium: the real 2 x 2 run (sample_traces/two-hosts-slow-link)
shows its hosts as groups on the timeline and the heatmap, and its slow_link finding on the overview."""
from __future__ import annotations

import pytest

from tests.dashboard.conftest import SAMPLES, Server, free_port, launch_argv, sample_run
from tests.dashboard.test_browser import PAGE_READY, lanes, open_tab


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    main = sample_run("two-hosts-slow-link")
    if main is None:
        pytest.skip("sample_traces/two-hosts-slow-link is empty: run `bash sample_traces/regenerate.sh "
                    "two-hosts-slow-link` (root)")
    port = free_port()
    srv = Server(launch_argv(main, None, SAMPLES, port), port, tmp_path_factory.mktemp("srv") / "log")
    yield srv
    srv.stop()


def _svg_texts(page, selector):
    return page.evaluate(f"() => Array.from(document.querySelectorAll('{selector}')).map(e => e.textContent)")


def test_hosts_on_timeline_heatmap_and_findings(server, page, artifacts):
    page.goto(server.url)
    page.wait_for_selector(PAGE_READY["overview"], timeout=60_000)
    page.wait_for_function("() => document.body.innerText.includes('the cross-host link bounds the step')",
                           timeout=60_000)
    assert "h0: ranks 0, 1; h1: ranks 2, 3" in page.inner_text("#overview-body")
    page.screenshot(path=str(artifacts / "hosts-overview.png"), full_page=True)

    open_tab(page, "timeline")
    page.wait_for_function("() => document.querySelectorAll('#tl-graph .annotation-text').length >= 2",
                           timeout=30_000)
    labels = _svg_texts(page, "#tl-graph .annotation-text")
    assert "host h0" in labels and "host h1" in labels
    order = [int(lane.split()[0][1:]) for lane in page.evaluate(
        "() => document.querySelector('#tl-graph .js-plotly-plot').layout.yaxis.categoryarray")][::-1]
    assert order == sorted(order)   # h0's ranks (0, 1) above h1's (2, 3), top to bottom
    shapes = page.evaluate("() => document.querySelector('#tl-graph .js-plotly-plot').layout.shapes"
                           ".map(s => s.name)")
    assert "host-rule-h1" in shapes and page.locator("#tl-graph .shapelayer path").count() >= 2
    page.screenshot(path=str(artifacts / "hosts-timeline.png"), full_page=True)

    open_tab(page, "communication")
    page.wait_for_selector("#comm-links-table", timeout=30_000)
    links = page.inner_text("#comm-links-table")
    assert "cross" in links and "intra" in links and "RING_ALLREDUCE" in links
    page.screenshot(path=str(artifacts / "hosts-communication.png"), full_page=True)

    open_tab(page, "negotiation")
    ticks = _svg_texts(page, "#neg-heatmap .ytick text")
    assert ticks == ["0 (h0)", "1 (h0)", "2 (h1)", "3 (h1)"]
    assert "rank 2 (h1)" in _svg_texts(page, "#neg-last .xtick text")
    page.screenshot(path=str(artifacts / "hosts-heatmap.png"), full_page=True)
    # a click on h1's first row still opens rank 2 on the timeline
    box = page.locator("#neg-heatmap .nsewdrag").first.bounding_box()
    page.mouse.click(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 2.5 / 4)
    page.wait_for_function("""() => {
        const gd = document.querySelector('#tl-graph .js-plotly-plot');
        return gd && gd.data && gd.data.length && gd.data.every(t => Array.from(t.y).every(y => y.startsWith('r2 ')));
    }""", timeout=30_000)
    assert all(lane.startswith("r2 ") for lane in lanes(page))
    assert page.errors == []

"""The dashboard in real headless Chromium (Debian's /usr/bin/chromium driven by playwright).

The main run is sample_traces/straggler (a real 4-rank run, the last rank slowed); the second run is
sample_traces/healthy, else
the real Horovod 0.28.1 timeline from ../shared. The picker's root is ../shared (sample_traces/ when
../shared is absent).
"""
from __future__ import annotations

import pytest

from tests.dashboard.conftest import HOROVOD, SAMPLES, SHARED, Server, free_port, horovod_file, launch_argv, sample_run

ROOT = SHARED if SHARED.is_dir() else SAMPLES   # the picker's trace root

PAGE_READY = {  # a selector that exists once the page has drawn (or has written why it cannot)
    "overview": "#card-straggler .card-value",
    "timeline": "#tl-graph .main-svg .barlayer .point",
    "breakdown": "#bd-rank-table, #breakdown-body .empty",
    "negotiation": "#neg-heatmap .main-svg .hm, #negotiation-body .empty",
    "fusion": "#fus-facts table.facts, #fusion-body .empty",
    "communication": "#comm-nccl-table, #communication-body .empty",
    "compare": "#cmp-table",
    "whatif": "#wi-predicted .card-value, #wi-none",   # a run with no complete step: the reason
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    main = sample_run("straggler")
    second = sample_run("healthy") or horovod_file("horovod0281_mpi_2ranks.json")
    port = free_port()
    srv = Server(launch_argv(main, second, ROOT, port), port, tmp_path_factory.mktemp("srv") / "log")
    srv.main_is_real = main is not None
    yield srv
    srv.stop()


def open_tab(page, name: str):
    page.click(f"#tab-{name}")
    page.wait_for_selector(PAGE_READY[name], timeout=30_000, state="attached")


def plot_data(page, graph_id: str):
    return page.evaluate(f"""() => {{
        const gd = document.querySelector('#{graph_id} .js-plotly-plot');
        return {{data: gd.data.map(t => ({{name: t.name, y: Array.from(t.y || [])}})),
                 range: gd.layout.xaxis ? gd.layout.xaxis.range : null}};
    }}""")


def lanes(page) -> set:
    return {y for t in plot_data(page, "tl-graph")["data"] for y in t["y"]}


def test_heatmap_click_narrows_the_timeline_to_that_rank(server, page, artifacts):
    page.goto(server.url)
    page.wait_for_selector(PAGE_READY["overview"], timeout=60_000)
    # the Overview's hub: the rank x step heatmap, lateness first, and the outliers beside it
    page.wait_for_selector("#ov-heatmap .main-svg .hm", timeout=30_000, state="attached")
    if server.main_is_real:
        assert page.locator("#ov-outliers .outliers.lateness .outlier").first.inner_text().startswith("rank 3:")
    page.locator("#ov-metric label", has_text="step time").click()
    page.wait_for_function("() => document.querySelector('#ov-heatmap .js-plotly-plot')._fullData[0].colorbar"
                           ".title.text === 'ms'", timeout=20_000)
    open_tab(page, "timeline")
    before = lanes(page)
    assert len({lane.split()[0] for lane in before}) > 1  # several ranks before the click
    full_range = plot_data(page, "tl-graph")["range"]
    open_tab(page, "negotiation")
    box = page.locator("#neg-heatmap .nsewdrag").first.bounding_box()
    ranks = page.evaluate("() => document.querySelector('#neg-heatmap .js-plotly-plot').data[0].y.length")
    row = 3  # rank 3's row (y axis reversed: rank 0 on top)
    page.mouse.click(box["x"] + box["width"] * 0.3, box["y"] + box["height"] * (row + 0.5) / ranks)
    page.wait_for_function("() => document.querySelector('#tab-timeline[aria-selected=true]') !== null", timeout=20_000)
    page.wait_for_function("""() => {
        const gd = document.querySelector('#tl-graph .js-plotly-plot');
        return gd && gd.data && gd.data.length && gd.data.every(t => Array.from(t.y).every(y => y.startsWith('r3 ')));
    }""", timeout=30_000)
    after = lanes(page)
    assert after and all(lane.startswith("r3 ") for lane in after)
    zoomed = plot_data(page, "tl-graph")["range"]
    # one step, not the whole run (the sample runs have 4 steps, the first one longer)
    assert zoomed[1] - zoomed[0] < 0.4 * (full_range[1] - full_range[0])
    assert "ranks=3" in page.url   # rank 3 pinned (the view in the URL)
    page.screenshot(path=str(artifacts / "timeline-after-heatmap-click.png"), full_page=True)
    assert page.errors == []


def test_bad_upload_shows_a_banner_naming_the_file_and_the_app_stays_up(server, page, tmp_path, artifacts):
    page.goto(server.url)
    page.wait_for_selector(PAGE_READY["overview"], timeout=60_000)
    for name, content in (("broken_rank3.json", b"\x00\x01\x02 binary, not a trace"),
                          ("cut_rank1.json", b'{"traceEvents": [ {"ph": "X", "na')):  # no complete event
        bad = tmp_path / name
        bad.write_bytes(content)
        page.set_input_files("#upload input[type=file]", str(bad))
        page.wait_for_function(f"() => document.querySelector('#banner').innerText.includes({name!r})",
                               timeout=30_000)
        assert "error" in page.get_attribute("#banner", "class")
        assert "Could not open" in page.inner_text("#banner")
    page.screenshot(path=str(artifacts / "bad-upload-banner.png"))
    big = tmp_path / "huge.json"
    big.write_bytes(b"[" + b" " * 1_200_000 + b"]")  # the test server's limit is 1 MB
    page.set_input_files("#upload input[type=file]", str(big))
    page.wait_for_function("() => document.querySelector('#banner').innerText.includes('huge.json')",
                           timeout=30_000)
    assert "upload limit" in page.inner_text("#banner")
    # the app is still up: a real trace uploads and becomes the shown run
    good = HOROVOD / "horovod0281_gloo_2ranks.json"
    if not good.exists():   # ../shared absent: a real ringscope rank trace instead
        good = SAMPLES / "healthy" / "rank-00000.json.gz"
    page.set_input_files("#upload input[type=file]", str(good))
    page.wait_for_selector("#banner.ok", timeout=30_000)
    assert good.name in page.inner_text("#banner")
    if "gloo" in good.name:
        page.wait_for_function("() => document.querySelector('#run-facts').innerText.includes('gloo')",
                               timeout=30_000)
    assert page.errors == []


def test_picker_refuses_paths_outside_the_root_and_opens_inside(server, page, artifacts):
    page.goto(server.url)
    page.wait_for_selector(PAGE_READY["overview"], timeout=60_000)
    for outside in ("../README.md", "/etc/passwd"):
        page.fill("#picker-path", outside)
        page.click("#picker-open")
        page.wait_for_function(f"() => document.querySelector('#banner').innerText.includes({outside!r})",
                               timeout=20_000)
        assert "refused" in page.inner_text("#banner")
        assert "error" in page.get_attribute("#banner", "class")
    page.screenshot(path=str(artifacts / "picker-refused.png"))
    if ROOT is SAMPLES:   # ../shared absent: open a sample run inside the root instead
        page.fill("#picker-path", "large-tensors")
        page.click("#picker-open")
        page.wait_for_selector("#banner.ok", timeout=30_000)
        assert "large-tensors" in page.inner_text("#banner") and page.errors == []
        return
    page.fill("#picker-path", "horovod_timelines/legacy_nccl_fused_7ranks.json")
    page.click("#picker-open")
    page.wait_for_selector("#banner.ok", timeout=30_000)
    page.wait_for_function("() => document.querySelector('#card-straggler .card-value').innerText === 'rank 7'",
                           timeout=30_000)
    shown = page.evaluate("() => Array.from(document.querySelectorAll('[role=tab]')).map(t => t.id.slice(4))")
    assert "negotiation" in shown and "breakdown" not in shown   # a Horovod timeline has no step marks
    for value in shown[1:]:  # every page it applies to also draws a real Horovod timeline (rank 0's file only)
        open_tab(page, value)
        page.screenshot(path=str(artifacts / f"horovod-{value}.png"), full_page=True)
    assert page.errors == []


def _title(page) -> str:
    return page.evaluate("() => document.querySelector('#tl-graph .js-plotly-plot').layout.title.text")


def test_timeline_zoom_and_step_window_redraw_on_the_server(server, page, artifacts):
    page.goto(server.url)
    page.wait_for_selector(PAGE_READY["overview"], timeout=60_000)
    open_tab(page, "timeline")
    whole = plot_data(page, "tl-graph")["range"]
    title = _title(page)
    box = page.locator("#tl-graph .nsewdrag").first.bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * 0.50, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.52, y, steps=5)
    page.mouse.up()
    page.wait_for_function(f"() => document.querySelector('#tl-graph .js-plotly-plot').layout.title.text !== {title!r}",
                           timeout=30_000)
    zoomed = plot_data(page, "tl-graph")["range"]
    assert zoomed[1] - zoomed[0] < (whole[1] - whole[0]) / 20
    assert " 0 drawn exactly" not in _title(page)  # zoomed in, spans are drawn as themselves
    page.screenshot(path=str(artifacts / "timeline-zoomed.png"), full_page=True)
    page.fill("#tl-step", "2")
    page.wait_for_function("""(z) => { const r = document.querySelector('#tl-graph .js-plotly-plot').layout.xaxis.range;
                                       return Math.abs(r[0] - z[0]) > 1e-6; }""", arg=zoomed, timeout=30_000)
    step = plot_data(page, "tl-graph")["range"]
    assert step[1] - step[0] < (whole[1] - whole[0]) / 3
    assert len({lane.split()[0] for lane in lanes(page)}) > 1  # every rank in the step window
    assert page.errors == []


def test_finding_evidence_opens_the_timeline_at_its_window_and_ranks(server, page, artifacts):
    """The straggler finding's link: the Timeline tab, only rank 3's lanes, the window of its worst step."""
    page.goto(server.url)
    page.wait_for_selector("#findings a.evidence", timeout=60_000)
    assert page.inner_text("#ov-verdict").startswith("Rank 3 is the straggler")   # the Overview's first line
    page.click("#findings a.evidence >> nth=0")
    page.wait_for_function("() => document.querySelector('#tab-timeline[aria-selected=true]') !== null", timeout=20_000)
    page.wait_for_function("""() => {
        const gd = document.querySelector('#tl-graph .js-plotly-plot');
        return gd && gd.data && gd.data.length && gd.data.every(t => Array.from(t.y).every(y => y.startsWith('r3 ')));
    }""", timeout=30_000)
    from viewer import Run

    run = Run.load(SAMPLES / "straggler")
    lo, hi = run.findings()["evidence"].iloc[0]["window_ns"]
    t0 = run.events["t_ns"].min()
    shown = plot_data(page, "tl-graph")["range"]
    assert shown == pytest.approx([(lo - t0) / 1e6, (hi - t0) / 1e6], abs=1e-3)
    page.screenshot(path=str(artifacts / "timeline-finding-evidence.png"), full_page=True)
    assert page.errors == []

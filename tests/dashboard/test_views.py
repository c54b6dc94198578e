"""Issue 42's dashboard in real headless Chromium, on every sample run and a shared Kineto trace, served by one
dashboard (conftest's every_run_server, shared with test_consistency): the verdict above the fold at 1400x1000,
each finding's evidence link opening its step and ranks on the timeline, its heatmap cell or its bandwidth point,
a copied URL restoring the view (drawn once), every page in the dark theme without console errors (a screenshot
of each kept), and only the pages that apply."""
from __future__ import annotations

import json
import re

import pytest

from tests.dashboard.conftest import SAMPLES, SHARED, sample_run
from tests.dashboard.test_browser import PAGE_READY
from viewer import Run
from viewer.dashboard.callbacks_url import href
from viewer.dashboard.layout import PAGES
from viewer.findings.rule import step_window

KINETO = SHARED / "kineto_traces" / "nccl_2rank"
SAMPLE_RUNS = [p for p in sorted(SAMPLES.iterdir()) if sample_run(p.name)]
SELECTED = "[role=tab][aria-selected=true]"


@pytest.fixture(scope="module")
def served(every_run_server):
    return every_run_server


def timeline_state(page) -> dict:
    """The timeline's x range (ms) and the ranks of its lanes, once drawn."""
    return page.evaluate("""() => {
        const gd = document.querySelector('#tl-graph .js-plotly-plot');
        return {range: gd.layout.xaxis.range, lanes: gd.data.flatMap(t => Array.from(t.y || []))};
    }""")


def lane_ranks(lanes) -> set:
    return {int(m[1]) for y in lanes if y and (m := re.match(r"(?:r|rank )(\d+)\b", str(y)))}


def wait_range(page, want, ms_origin):
    """Wait until the timeline shows the window ``want`` (ns on the run's axis)."""
    lo, hi = ((want[0] - ms_origin) / 1e6, (want[1] - ms_origin) / 1e6)
    page.wait_for_function("""([lo, hi]) => {
        const gd = document.querySelector('#tl-graph .js-plotly-plot');
        const r = gd && gd.layout && gd.layout.xaxis && gd.layout.xaxis.range;
        return r && Math.abs(r[0] - lo) < 1e-3 && Math.abs(r[1] - hi) < 1e-3;
    }""", arg=[lo, hi], timeout=30_000)


def open_overview(page, served, path, run):
    """Open ``path``'s Overview by its URL; wait for its verdict."""
    page.goto(served.url + href(served.ids[path], "overview"))
    page.wait_for_function("(v) => (document.querySelector('#ov-verdict') || {}).innerText === v",
                           arg=run.headline()["verdict"], timeout=60_000)


def opens_timeline(page, run, ev):
    """The timeline at the evidence's window (else its first step's, else the whole run) on its ranks."""
    page.wait_for_selector(f"#tab-timeline{SELECTED}", timeout=20_000)
    want = ev["window_ns"] or (step_window(run, ev["steps"][0]) if ev["steps"] else None)
    if want:
        wait_range(page, want, int(run.events["t_ns"].min()))
    pinned = set(ev["ranks"]) & {int(r) for r in run.events["rank"].unique()}
    if pinned:
        page.wait_for_function("(want) => { const gd = document.querySelector('#tl-graph .js-plotly-plot');"
                               "const ys = gd.data.flatMap(t => Array.from(t.y || [])).filter(y => y);"
                               "return ys.length > 0 && ys.every(y => "
                               "want.some(r => String(y).match(new RegExp('^(r|rank )' + r + '\\\\b'))))}",
                               arg=sorted(pinned), timeout=30_000)
        assert set() < lane_ranks(timeline_state(page)["lanes"]) <= pinned   # a dead rank may have no span there


def opens_heatmap_cell(page, run, ev):
    """The Negotiation page, the evidence's ranks outlined at its step on the lateness heatmap."""
    page.wait_for_selector(f"#tab-negotiation{SELECTED}", timeout=20_000)
    cells = sorted(f"evidence-{ev['steps'][0]}-{r}" for r in ev["ranks"])
    page.wait_for_function("(want) => { const gd = document.querySelector('#neg-heatmap .js-plotly-plot');"
                           "const got = ((gd && gd.layout.shapes) || []).map(s => s.name).filter(n => n && "
                           "n.startsWith('evidence-')).sort(); return JSON.stringify(got) === JSON.stringify(want); }",
                           arg=cells, timeout=30_000)


def opens_bandwidth_point(page, run, ev):
    """The Communication page, the evidence's message size marked on the bandwidth chart."""
    page.wait_for_selector(f"#tab-communication{SELECTED}", timeout=20_000)
    page.wait_for_function("(x) => { const gd = document.querySelector('#comm-busbw .js-plotly-plot');"
                           "return gd && gd.data.some(t => t.name.endsWith('n½') && Math.abs(t.x[0] / x - 1) < 1e-6);}",
                           arg=ev["value"], timeout=30_000)


OPENS = {"timeline": opens_timeline, "heatmap": opens_heatmap_cell, "bandwidth": opens_bandwidth_point}
# the evidence links a sample's findings must include beyond the timeline's
LINKS = {"straggler": {"heatmap"}, "slow-data": {"heatmap"}, "healthy": {"bandwidth"}}


@pytest.mark.parametrize("path", [*SAMPLE_RUNS, KINETO], ids=lambda p: p.name)
def test_verdict_first_and_every_evidence_link_opens_its_step_and_ranks(served, page, path, artifacts):
    if not path.is_dir():
        pytest.skip(f"shared Kineto trace {path} is absent (../shared not mounted)")
    run = Run.load(path)
    open_overview(page, served, path, run)
    box = page.locator("#ov-verdict").bounding_box()
    assert box["y"] + box["height"] <= 1000   # above the fold at 1400x1000
    page.screenshot(path=str(artifacts / f"views-{path.name}-overview.png"))
    found = list(run.findings()["evidence"])
    links = page.evaluate("() => Array.from(document.querySelectorAll('#findings .finding')).flatMap((card, i) =>"
                          "Array.from(card.querySelectorAll('a.evidence')).map(a => [i, a.classList[1]]))")
    assert [i for i, kind in links if kind == "timeline"] == [
        i for i, ev in enumerate(found) if ev["ranks"] or ev["steps"] or ev["window_ns"]]
    assert LINKS.get(path.name, set()) <= {kind for _, kind in links}
    shot = set()
    for k, (i, kind) in enumerate(links):
        page.click(f"#findings a.evidence >> nth={k}")
        OPENS[kind](page, run, found[i])
        if kind not in shot:   # the first link of each kind
            shot.add(kind)
            page.screenshot(path=str(artifacts / f"views-{path.name}-evidence-{kind}.png"))
        if k + 1 < len(links):
            page.click("#tab-overview")
            page.wait_for_selector("#findings a.evidence", timeout=30_000)
    assert page.errors == []


def test_a_copied_url_restores_run_page_step_ranks_and_window(served, browser, page, artifacts):
    path = SAMPLES / "straggler"   # not the server's first run: the page opens on it, not on that one first
    run = Run.load(path)
    ev = run.findings()["evidence"].iloc[0]
    bodies = []   # the Overview's bodies drawn (a 204 is a callback that drew nothing)
    page.on("response", lambda r: bodies.append(r.status) if "/_dash-update-component" in r.url and
            json.loads(r.request.post_data)["output"] == "overview-body.children" and r.status == 200 else None)
    open_overview(page, served, path, run)
    page.wait_for_load_state("networkidle")
    assert len(bodies) == 1   # opening a URL draws its view once
    page.click("#findings a.evidence >> nth=0")
    wait_range(page, ev["window_ns"], int(run.events["t_ns"].min()))
    copied = page.url
    assert f"run={served.ids[path]}" in copied and "page=timeline" in copied and "ranks=3" in copied
    other = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    other.goto(copied)
    other.wait_for_selector(f"#tab-timeline{SELECTED}", timeout=60_000)
    wait_range(other, ev["window_ns"], int(run.events["t_ns"].min()))
    assert lane_ranks(timeline_state(other)["lanes"]) == {3}
    other.screenshot(path=str(artifacts / "views-copied-url.png"))
    # another run and page by URL alone: the run is chosen, its tab opened
    healthy = SAMPLES / "healthy"
    other.goto(served.url + href(served.ids[healthy], "negotiation"))
    other.wait_for_selector(f"#tab-negotiation{SELECTED}", timeout=60_000)
    other.wait_for_selector("#neg-heatmap .main-svg", timeout=30_000)
    assert "healthy" in other.input_value("#run-a")
    other.context.close()
    assert page.errors == []


def test_every_page_renders_in_the_dark_theme_without_console_errors_and_only_the_pages_that_apply(
        served, browser, artifacts):
    """Every page of the straggler sample drawn (a screenshot of each kept), dark as the system asks; a Kineto run
    without the pages that do not apply to it."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, color_scheme="dark")
    page = context.new_page()
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.goto(served.url + href(served.ids[SAMPLES / "straggler"], "overview"))
    page.wait_for_selector("#ov-steps .main-svg", timeout=60_000)
    assert page.inner_text("#card-straggler .card-value") == "rank 3"  # planted in the sample run
    assert page.evaluate("() => document.documentElement.getAttribute('data-mantine-color-scheme')") == "dark"
    background = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
    assert sum(map(int, re.findall(r"\d+", background)[:3])) < 3 * 80, background
    tick = page.evaluate("() => getComputedStyle(document.querySelector('#ov-steps .xtick text')).fill")
    assert sum(map(int, re.findall(r"\d+", tick)[:3])) > 3 * 150, tick   # light text on the dark page
    tabs = page.locator("[role=tab]").all_inner_texts()
    assert [t.lower().replace(" ", "") for t in tabs] == [value for value, _ in PAGES]   # every page applies
    for value, _ in PAGES:
        page.click(f"#tab-{value}")
        page.wait_for_selector(f"#tab-{value}{SELECTED}", timeout=20_000)
        page.wait_for_selector(PAGE_READY[value], timeout=30_000, state="attached")
        page.screenshot(path=str(artifacts / f"page-{value}.png"), full_page=True)
        if value == "fusion":
            assert page.locator("#fus-fill .barlayer .point").count() > 0
    if KINETO.is_dir():   # a Kineto run has no negotiation or fusion: their tabs are gone
        page.goto(served.url + href(served.ids[KINETO], "overview"))
        page.wait_for_selector("#ov-verdict", timeout=60_000)
        page.wait_for_function("() => !document.querySelector('#tab-negotiation')", timeout=20_000)
        tabs = page.locator("[role=tab]").all_inner_texts()
        assert "Negotiation" not in tabs and "Fusion" not in tabs and "Timeline" in tabs
    context.close()
    assert errors == []

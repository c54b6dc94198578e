"""Issue 41's "one answer": every headline figure the dashboard shows, read from the page rendered in
Chromium, equals as text ``viewer.units`` of ``ringscope summarize --json``'s ``headline``; so do the Run
facts (``cli/tables.fact_rows`` of its ``run``), the α/β on the Communication page, the memcpy share on the
Fusion page and the measured step on the What-if page; the timeline's axis spans the run's duration; and
``ringscope whatif --json``'s ``measured_step_ms`` is the headline's ``step_ms``.

Over every run in sample_traces/, the shared Horovod timelines and the shared Kineto traces: one server holds
them all (the run dropdown switches), and the CLI runs as subprocesses, two at a time, while it starts."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from tests.dashboard.conftest import EVERY_RUN, REPO, SHARED, grid_rows
from viewer import units
from viewer.cli.tables import fact_rows

RUNS = EVERY_RUN
if SHARED.is_dir():
    PARAMS = [pytest.param(p, id=p.name) for p in RUNS]
else:
    PARAMS = [pytest.param(p, id=p.name) for p in RUNS] + [pytest.param(
        None, id="shared", marks=pytest.mark.skip(reason=f"{SHARED} is absent: the shared Horovod timelines and "
                                                         "Kineto traces are not checked"))]
# a card's headline figure and its unit; the late rank is checked on its own
CARDS = {"card-step": ("step_ms", "ms"), "card-exposed": ("exposed_comm_pct", "pct"),
         "card-busbw": ("busbw_gbps", "gbps"), "card-steps": ("steps", "count"), "card-ranks": ("ranks", "count"),
         "card-duration": ("duration_ms", "ms"), "card-alpha": ("alpha_us", "us"), "card-beta": ("beta_gbps", "gbps"),
         "card-memcpy": ("memcpy_pct", "pct")}

# the What-if page's measured step (the headline's, as on the Overview) on a run of each family the replay
# reads; its fit costs seconds on the others
WHATIF_PAGE = ("hang", "horovod0281_gloo_2ranks.json", "single_rank")

pytestmark = pytest.mark.timeout(600)


# the CLI's own entry point for each run in turn, in one subprocess (an interpreter and its imports per run
# cost more than the runs): what ``ringscope COMMAND RUN --json`` prints, and its exit status
CLI = """import contextlib, io, json, sys
from viewer.cli import main
for path in sys.argv[2:]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main([sys.argv[1], path, "--json"])
    print(json.dumps({"rc": rc, "json": json.loads(out.getvalue()) if rc == 0 else None}), flush=True)
"""


def cli(command: str, paths) -> dict:
    """``{path: (exit status, its --json or None)}`` of ``ringscope COMMAND PATH --json`` for each path."""
    p = subprocess.run([sys.executable, "-c", CLI, command, *map(str, paths)], cwd=REPO, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    return {path: (r["rc"], r["json"]) for path, r in zip(paths, map(json.loads, p.stdout.splitlines()))}


@pytest.fixture(scope="module")
def served(browser, every_run_server):
    """The dashboard over every run, a page on it, and each run's ``summarize --json``."""
    srv = every_run_server
    summaries = cli("summarize", RUNS)
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.errors = []
    page.on("console", lambda m: page.errors.append(m.text) if m.type == "error" else None)
    page.goto(srv.url)
    page.wait_for_selector("#card-step .card-value", timeout=60_000)
    yield page, summaries, {p: f"{p.name} (run{i + 1})" for i, p in enumerate(RUNS)}
    context.close()


def settle(read, want, timeout: float = 30.0):
    """``read()`` once it gives ``want`` (or ``want(value)`` holds): a page may still show the previous run
    for a moment; else its last value, for the assertion to show."""
    ok = want if callable(want) else (lambda v: v == want)
    deadline = time.monotonic() + timeout
    got = read()
    while not ok(got) and time.monotonic() < deadline:
        time.sleep(0.2)
        got = read()
    return got


def open_tab(page, name: str):
    page.click(f"#tab-{name}")
    page.wait_for_selector(f"#tab-{name}[aria-selected=true]", timeout=10_000)


def texts(page, selector: str) -> dict:
    """``{id: text}`` of the elements ``selector`` picks (a card's id -> its value)."""
    return page.evaluate(f"""() => Object.fromEntries(Array.from(document.querySelectorAll('{selector}'))
        .map(e => [e.closest('[id]').id, e.innerText]))""")


def pairs(page, table: str) -> list:
    """A two-column table's rows as [label, value]."""
    return page.evaluate(f"""() => Array.from(document.querySelectorAll('{table} tr'))
        .map(tr => [tr.querySelector('th').innerText, tr.querySelector('td').innerText])""")


def allreduce_fit(page) -> dict:
    """``{header: cell}`` of the ALLREDUCE row of the Communication page's α-β table ({} when none)."""
    return next((r for r in grid_rows(page, "comm-fit-table") or () if r.get("op") == "ALLREDUCE"), {})


@pytest.mark.parametrize("path", PARAMS)
def test_every_page_shows_the_summary_headline(served, path, artifacts):
    page, summaries, labels = served
    rc, summary = summaries[path]
    assert rc == 0, f"ringscope summarize {path} --json: exit status {rc}"
    h = summary["headline"]
    open_tab(page, "overview")
    page.click("#run-a")
    page.get_by_role("option", name=labels[path], exact=True).click()
    want = {cid: units.fmt(h[key], unit) for cid, (key, unit) in CARDS.items()}
    want["ov-verdict"] = h["verdict"]

    def overview():
        got = texts(page, ".card-value")
        got["ov-verdict"] = page.inner_text("#ov-verdict")
        return {k: got.get(k, units.MISSING) for k in want}   # a card the run has no figure for is left out

    assert settle(overview, want) == want
    late = page.inner_text("#card-straggler .card-value")
    assert late == f"rank {h['late_rank']}" if h["late_rank"] is not None else late in ("none", units.MISSING)
    facts = [[k, v] for k, v, _ in fact_rows(summary["run"]) if k != "source"]   # the path as each was given
    assert [r for r in pairs(page, "#run-facts") if r[0] != "source"] == facts
    page.screenshot(path=str(artifacts / f"consistency-{path.name}.png"), full_page=True)

    open_tab(page, "timeline")   # its axis: the run's first event to its last one's end, as duration_ms
    span = settle(lambda: page.evaluate("""(label) => {
        const gd = document.querySelector('#tl-graph .js-plotly-plot');
        return gd?.layout?.title?.text?.startsWith(label + ':') ? gd.layout.xaxis.range : null;
    }""", path.name), lambda r: r is not None)
    assert span[0] == 0 and units.fmt(span[1], "ms") == units.fmt(h["duration_ms"], "ms")

    if h["alpha_us"] is not None:   # the fit the headline took is the Communication page's ALLREDUCE row
        open_tab(page, "communication")
        ab = {"α": units.fmt(h["alpha_us"], "us"), "β": units.rate(h["beta_gbps"])}
        assert settle(lambda: {k: allreduce_fit(page).get(k) for k in ab}, ab) == ab
    if h["memcpy_pct"] is not None:
        open_tab(page, "fusion")
        memcpy = units.pct(h["memcpy_pct"])
        assert settle(lambda: dict(pairs(page, "#fus-facts-table")).get("memcpy share of op time"), memcpy) == memcpy
    if path.name in WHATIF_PAGE:
        open_tab(page, "whatif")
        step = units.fmt(h["step_ms"], "ms")
        measured = "() => (document.querySelector('#wi-measured .card-value') || {}).innerText"
        assert settle(lambda: page.evaluate(measured), step, 60) == step
    assert page.errors == []


@pytest.fixture(scope="module")
def whatifs():
    return cli("whatif", RUNS)


@pytest.mark.parametrize("path", PARAMS)
def test_whatif_measures_the_headline_step(served, whatifs, path):
    rc, whatif = whatifs[path]
    if rc != 0:
        pytest.skip(f"ringscope whatif cannot replay {path.name}")
    gens = sorted(path.glob("gen-*")) if path.is_dir() else []   # an elastic run replays its last generation
    summary = cli("summarize", gens[-1:])[gens[-1]][1] if gens else served[1][path][1]
    assert whatif["measured_step_ms"] == summary["headline"]["step_ms"]

"""The "What if" page in real headless Chromium: the knobs move the prediction, both timelines draw."""
from __future__ import annotations

import pytest

from tests.dashboard.conftest import SAMPLES, Server, free_port, launch_argv, sample_run

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    main = sample_run("straggler")
    if main is None:
        pytest.skip("sample_traces/straggler is empty: run `bash sample_traces/regenerate.sh straggler`")
    port = free_port()
    srv = Server(launch_argv(main, None, SAMPLES, port), port, tmp_path_factory.mktemp("srv") / "log")
    yield srv
    srv.stop()


def _ms(page, card):
    text = page.text_content(f"#{card} .card-value")
    return float(text.split()[0].replace(",", ""))


def _wait_change(page, card, old):
    page.wait_for_function(f"""() => {{
        const e = document.querySelector('#{card} .card-value');
        return e && parseFloat(e.textContent.replace(/,/g, '')) !== {old};
    }}""", timeout=60_000)


def test_whatif_page_predicts_and_draws(server, page):
    page.goto(server.url)
    page.wait_for_selector("#card-straggler .card-value", timeout=60_000)
    page.click("#tab-whatif")
    page.wait_for_selector("#wi-predicted .card-value", timeout=60_000)
    base = _ms(page, "wi-predicted")
    assert abs(base / _ms(page, "wi-measured") - 1) <= 0.10   # the run's own settings
    bars = page.evaluate("""() => document.querySelector('#wi-timeline .js-plotly-plot').data
                                   .map(t => t.xaxis || 'x')""")
    assert {"x", "x2"} <= set(bars)   # predicted and measured panels
    page.fill("#wi-threshold", "0")
    page.press("#wi-threshold", "Enter")
    _wait_change(page, "wi-predicted", base)
    assert _ms(page, "wi-predicted") > base   # fusion off: slower
    off = _ms(page, "wi-predicted")
    page.click("#wi-flags input[type=checkbox]")
    _wait_change(page, "wi-predicted", off)
    assert _ms(page, "wi-predicted") < off    # without the planted straggler: faster
    assert page.errors == []

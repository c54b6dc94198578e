"""The dashboard draws with plotly.js's cartesian bundle (viewer/dashboard/plotlyjs: a third of the full bundle's
bytes and evaluation, most of the Overview's heatmap's wait at 1,024 ranks; issue 43): it is the plotly.js that
plotly.py writes figures for, it has every trace type the dashboard's figures use, and it is what dcc.Graph gets
where it loads plotly.js from."""
from __future__ import annotations

import re
from pathlib import Path

from plotly.offline import get_plotlyjs_version

from viewer.dashboard.app import PLOTLY_JS, make_app

DASHBOARD = Path(PLOTLY_JS).parents[1]
DCC_URL = "/_dash-component-suites/plotly/package_data/plotly.min.js"   # dash-renderer's window._dashPlotlyJSURL


def _version(head: str) -> str | None:
    found = re.search(r"plotly\.js \(cartesian - minified\) v(\S+)", head)
    return found[1] if found else None


def test_bundle_is_the_plotly_js_plotly_py_writes_for():
    version = _version(PLOTLY_JS.read_text()[:300])
    assert version == get_plotlyjs_version(), (
        f"{PLOTLY_JS.name} is v{version}, plotly.py writes for {get_plotlyjs_version()}: replace it with "
        "plotly.js-cartesian-dist-min of that version (npm)")


def test_bundle_has_every_trace_type_the_figures_use():
    registered = set(re.findall(r'moduleType:"trace",name:"(\w+)"', PLOTLY_JS.read_text()))
    used = {m.lower() for f in DASHBOARD.glob("*.py") for m in re.findall(r"\bgo\.([A-Z]\w*)\(", f.read_text())}
    used -= {"figure"}
    assert {"heatmap", "bar", "scatter"} <= used
    assert used <= registered, f"trace types not in {PLOTLY_JS.name}: {sorted(used - registered)}"


def test_graphs_get_the_bundle(tmp_path):
    js = make_app(root=tmp_path).server.test_client().get(DCC_URL)
    assert js.status_code == 200 and js.mimetype == "text/javascript"
    assert _version(js.get_data(as_text=True)[:300]) == get_plotlyjs_version()

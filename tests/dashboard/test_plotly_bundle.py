"""The dashboard draws with plotly.js's cartesian bundle (viewer/dashboard/plotlyjs: a third of the full bundle's
bytes and evaluation, most of the Overview's heatmap's wait at 1,024 ranks; issue 43): it is the plotly.js that
plotly.py writes figures for, it has every trace type the dashboard's figures use, and it is what dcc.Graph gets
where it loads plotly.js from."""
from __future__ import annotations

import re
from pathlib import Path

from plotly.offline import get_plotlyjs_version

from viewer.dashboard.app import PLOTLY_JS, bundle_version, cartesian_version, make_app

DASHBOARD = Path(PLOTLY_JS).parents[1]
DCC_URL = "/_dash-component-suites/plotly/package_data/plotly.min.js"   # dash-renderer's window._dashPlotlyJSURL


def _served(tmp_path) -> str:
    js = make_app(root=tmp_path).server.test_client().get(DCC_URL)
    assert js.status_code == 200
    return js.get_data(as_text=True)[:300]


def test_graphs_get_the_bundle_plotly_py_writes_for(tmp_path):
    """The cartesian bundle where it is the plotly.js of the installed plotly.py; else Dash's own (full) one."""
    assert bundle_version() is not None   # the banner names its version
    head = _served(tmp_path)
    if bundle_version() == get_plotlyjs_version():
        assert cartesian_version(head) == get_plotlyjs_version()
    else:   # plotly.py upgraded past the bundle: replace it with plotly.js-cartesian-dist-min of its version (npm)
        assert cartesian_version(head) is None and get_plotlyjs_version() in head


def test_another_plotly_keeps_dashs_own_bundle(tmp_path, monkeypatch):
    import plotly.offline

    monkeypatch.setattr(plotly.offline, "get_plotlyjs_version", lambda: "0.0.1")
    assert cartesian_version(_served(tmp_path)) is None


def test_bundle_has_every_trace_type_the_figures_use():
    registered = set(re.findall(r'moduleType:"trace",name:"(\w+)"', PLOTLY_JS.read_text()))
    used = {m.lower() for f in DASHBOARD.glob("*.py") for m in re.findall(r"\bgo\.([A-Z]\w*)\(", f.read_text())}
    used -= {"figure"}
    assert {"heatmap", "bar", "scatter"} <= used
    assert used <= registered, f"trace types not in {PLOTLY_JS.name}: {sorted(used - registered)}"



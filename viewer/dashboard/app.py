"""Wire the Dash app: the runs given at startup in a registry, the layout and the callback groups."""
from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import dash
import flask

from viewer import Run
from viewer.dashboard import callbacks_inputs, callbacks_pages, callbacks_timeline, callbacks_url
from viewer.dashboard.callbacks_inputs import EXPANSION_FACTOR
from viewer.dashboard.components import banner
from viewer.dashboard.layout import build_layout
from viewer.dashboard.paths import list_runs
from viewer.dashboard.registry import Registry

ASSETS = Path(__file__).with_name("assets")
# plotly.js's cartesian bundle, the plotly.js version plotly.py writes figures for (tests/dashboard/test_plotly_bundle)
PLOTLY_JS = Path(__file__).with_name("plotlyjs") / "plotly-cartesian.min.js"


@dataclass
class AppContext:
    registry: Registry
    root: Path
    upload_dir: Path
    max_upload_bytes: int
    max_expanded_bytes: int


UPLOADS_PREFIX = "ringscope-uploads-"


def upload_root() -> Path:
    """A fresh temp folder for this server's uploads, removed at exit; folders left by servers that
    died without exiting (their pid is gone) are removed now."""
    tmp = Path(tempfile.gettempdir())
    for old in tmp.glob(UPLOADS_PREFIX + "*"):
        pid = old.name[len(UPLOADS_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
    path = Path(tempfile.mkdtemp(prefix=f"{UPLOADS_PREFIX}{os.getpid()}-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:   # someone else's process
        return True
    return True


def cartesian_version(head: str) -> str | None:
    """The plotly.js version a cartesian bundle's banner (its first characters) names; None for another bundle."""
    found = re.search(r"plotly\.js \(cartesian - minified\) v(\S+)", head)
    return found[1] if found else None


def bundle_version() -> str | None:
    """The plotly.js version of the cartesian bundle this dashboard serves."""
    with open(PLOTLY_JS, encoding="utf-8") as f:
        return cartesian_version(f.read(300))


def serve_plotly_js(app) -> None:
    """dcc.Graph loads plotly.js when a graph first shows, from the URL where Dash serves its full bundle (4.8 MB);
    the cartesian bundle has every trace type the pages draw, in a third of the bytes and of the evaluation that
    holds the first graph back (the Overview's heatmap at 1,024 ranks; issue 43): it is served there instead, still
    loaded only once a graph shows, after the first view's cards. Only where it is the plotly.js this plotly.py
    writes figures for: with another plotly.py, Dash's own full bundle stays."""
    from plotly.offline import get_plotlyjs_version

    if bundle_version() != get_plotlyjs_version():   # another plotly.py writes for another plotly.js: its own
        return
    url = app.get_relative_path("/_dash-component-suites/plotly/package_data/plotly.min.js")

    @app.server.before_request
    def cartesian():
        if flask.request.path == url:
            return flask.send_file(PLOTLY_JS, mimetype="text/javascript")
        return None


def make_app(runs=(), root=None, max_upload_mb: float = 64.0, tables=None, label: str = "run", nsys=(),
             max_expanded_mb=None, max_runs: int = 8, max_memory_mb: float = 2048.0):
    """Load ``runs`` (raises LoadError; Nsight exports ``nsys`` overlaid on the first) or take ready ``tables``;
    they stay, while ``max_runs`` and ``max_memory_mb`` bound those opened or uploaded later. The picker is
    confined to ``root``; a gzip upload may expand to ``max_expanded_mb`` (default: 4x the upload limit)."""
    registry = Registry(max_runs, int(max_memory_mb * 1e6))
    if tables is not None:
        registry.add(Run(tables), label, pin=True).warm()
    for i, r in enumerate(runs):
        held = registry.add_path(r, pin=True)
        if i == 0 and nsys:
            held.overlay_nsys(nsys)
        held.warm()
    root = Path(runs[0]).resolve().parent if root is None and runs else Path(root or Path.cwd()).resolve()
    expanded = max_expanded_mb if max_expanded_mb is not None else EXPANSION_FACTOR * max_upload_mb
    ctx = AppContext(registry, root, upload_root(), int(max_upload_mb * 1e6), int(expanded * 1e6))
    # a page's figures are drawn into its body when it has them, so some inputs (the heatmap's clicks, the
    # findings' evidence links) are not in the layout until then
    app = dash.Dash(__name__, title="ringscope", assets_folder=str(ASSETS), update_title=None,
                    suppress_callback_exceptions=True)
    # base64 inflates uploads by 4/3: up to ~1.5x the limit the callback answers with a banner naming
    # the file; far beyond it the request itself is refused before it is read
    app.server.config["MAX_CONTENT_LENGTH"] = int(ctx.max_upload_bytes * 2) + (1 << 20)
    options = registry.options()
    run_a = options[0]["value"] if options else None
    run_b = options[1]["value"] if len(options) > 1 else None
    notes = [n for h in (registry.get(o["value"]) for o in options) for n in h.notes]
    kids, cls = banner("warning", notes)
    picker = list_runs(root)
    app.layout = build_layout(options, run_a, run_b, picker, max_upload_mb, kids, cls)
    serve_plotly_js(app)
    callbacks_inputs.register(app, ctx)
    callbacks_timeline.register(app, ctx)
    callbacks_pages.register(app, ctx)
    callbacks_url.register(app, ctx)
    return app

"""Wire the Dash app: layout plus the three callback groups, around one run registry."""
from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from viewer.dashboard.registry import Registry

ASSETS = Path(__file__).with_name("assets")


@dataclass
class AppContext:
    registry: Registry
    root: Path
    upload_dir: Path
    max_upload_bytes: int


def create_app(registry: Registry, root, max_upload_mb: float = 64.0, startup_notes=()):
    """A Dash app over ``registry``; the picker is confined to ``root``."""
    import dash

    from viewer.dashboard import callbacks_inputs, callbacks_pages, callbacks_timeline
    from viewer.dashboard.components import banner
    from viewer.dashboard.layout import build_layout
    from viewer.dashboard.paths import list_runs

    root = Path(root).resolve()
    ctx = AppContext(registry, root, Path(tempfile.mkdtemp(prefix="ringscope-uploads-")),
                     int(max_upload_mb * 1e6))
    app = dash.Dash(__name__, title="ringscope", assets_folder=str(ASSETS), update_title=None)
    # base64 inflates uploads by 4/3: up to ~1.5x the limit the callback answers with a banner naming
    # the file; far beyond it the request itself is refused before it is read
    app.server.config["MAX_CONTENT_LENGTH"] = int(ctx.max_upload_bytes * 2) + (1 << 20)
    options = registry.options()
    run_a = options[0]["value"] if options else None
    run_b = options[1]["value"] if len(options) > 1 else None
    notes = [n for v in (registry.get(o["value"]) for o in options) for n in v.notes] + list(startup_notes)
    kids, cls = banner("warning", notes)
    picker = [{"label": p, "value": p} for p in list_runs(root)]
    app.layout = build_layout(options, run_a, run_b, picker, max_upload_mb, kids, cls)
    callbacks_inputs.register(app, ctx)
    callbacks_timeline.register(app, ctx)
    callbacks_pages.register(app, ctx)
    app.ringscope = ctx
    return app

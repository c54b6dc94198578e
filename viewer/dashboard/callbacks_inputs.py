"""Callbacks that bring runs in: the picker (confined to the trace root) and the upload."""
from __future__ import annotations

import base64
import binascii
import re
import tempfile
from pathlib import Path

from dash import Input, Output, State, ctx as dash_ctx, no_update
from dash.exceptions import PreventUpdate

from viewer.dashboard.components import banner
from viewer.dashboard.paths import PathRefused, is_trace_file, resolve_under
from viewer.dashboard.registry import LoadError

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(filename: str) -> str:
    """The base name of an uploaded file with anything unusual replaced (never a path)."""
    base = (filename or "upload").replace("\\", "/").rsplit("/", 1)[-1]
    base = _SAFE.sub("_", base).lstrip(".") or "upload"
    return base[:120]


def save_upload(contents: str, filename: str, upload_dir: Path, max_bytes: int) -> Path:
    """Decode a dcc.Upload data URL into its own fresh directory; LoadError when too big or bad."""
    name = safe_name(filename)
    if not is_trace_file(name):
        raise LoadError(f"{name}: not a trace file (expected .json, .json.gz, .trace or .trace.gz)")
    try:
        _, data = contents.split(",", 1)
        if len(data) * 3 // 4 > max_bytes + 3:
            raise LoadError(f"{name}: larger than the upload limit of {max_bytes / 1e6:g} MB")
        raw = base64.b64decode(data, validate=True)
    except (ValueError, binascii.Error):
        raise LoadError(f"{name}: the upload could not be decoded") from None
    if len(raw) > max_bytes:
        raise LoadError(f"{name}: larger than the upload limit of {max_bytes / 1e6:g} MB")
    target = Path(tempfile.mkdtemp(prefix="upload-", dir=upload_dir)) / name
    target.write_bytes(raw)
    return target


def register(app, ctx):
    @app.callback(Output("banner", "children"), Output("banner", "className"),
                  Output("run-a", "options"), Output("run-b", "options"), Output("run-a", "value"),
                  Input("picker-open", "n_clicks"), Input("picker-path", "n_submit"),
                  Input("picker-list", "value"), Input("upload", "contents"),
                  State("picker-path", "value"), State("upload", "filename"), prevent_initial_call=True)
    def bring_in(_clicks, _submit, listed, contents, typed, filename):
        trigger = dash_ctx.triggered_id
        try:
            if trigger == "upload":
                if not contents:
                    raise PreventUpdate
                path = save_upload(contents, filename, ctx.upload_dir, ctx.max_upload_bytes)
                label = safe_name(filename)
            else:
                rel = listed if trigger == "picker-list" else typed
                if not rel:
                    raise PreventUpdate
                path = resolve_under(ctx.root, rel)
                label = Path(rel).name if rel != "." else Path(ctx.root).name
            view = ctx.registry.add_path(path, label=label).warm()
        except (PathRefused, LoadError) as exc:
            children, cls = banner("error", [f"Could not open: {exc}"])
            return children, cls, no_update, no_update, no_update
        kind = "warning" if view.notes else "ok"
        children, cls = banner(kind, [f"Loaded {view.label} as {view.id}"] + view.notes)
        options = ctx.registry.options()
        return children, cls, options, options, view.id

"""Callbacks that bring runs in: the picker (confined to the trace root) and the upload."""
from __future__ import annotations

import base64
import binascii
import re
import shutil
import tempfile
import zlib
from pathlib import Path

from dash import Input, Output, State, no_update
from dash import ctx as dash_ctx
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


def save_upload(contents: str, filename: str, upload_dir: Path, max_bytes: int,
                max_expanded: int | None = None) -> Path:
    """Decode a dcc.Upload data URL into a fresh directory; LoadError when too big or bad. A gzip upload is
    expanded here (at most ``max_expanded`` bytes) so that the loader reads a file of known size."""
    name = safe_name(filename)
    if not is_trace_file(name):
        raise LoadError(f"{name}: not a trace file (expected .json, .json.gz, .trace or .trace.gz)")
    try:
        _, data = contents.split(",", 1)
        raw = base64.b64decode(data, validate=True) if len(data) * 3 // 4 <= max_bytes + 3 else None
    except (ValueError, binascii.Error):
        raise LoadError(f"{name}: the upload could not be decoded") from None
    if raw is None or len(raw) > max_bytes:
        raise LoadError(f"{name}: larger than the upload limit of {max_bytes / 1e6:g} MB")
    folder = Path(tempfile.mkdtemp(prefix="upload-", dir=upload_dir))
    try:
        gzipped = raw[:2] == GZIP_MAGIC
        target = folder / (name.removesuffix(".gz") if gzipped else name)
        with open(target, "wb") as out:
            if gzipped:
                expand_gzip(raw, out, max_expanded if max_expanded is not None else EXPANSION_FACTOR * max_bytes, name)
            else:
                out.write(raw)
        return target
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


GZIP_MAGIC = b"\x1f\x8b"
EXPANSION_FACTOR = 4   # default cap on an expanded gzip upload, as a multiple of the upload limit
_CHUNK = 1 << 20


def expand_gzip(raw: bytes, out, cap: int, name: str) -> int:
    """Write the gunzipped ``raw`` (every member) to ``out`` a chunk at a time; returns the size. LoadError past
    ``cap`` bytes or when not gzip; a cut-off stream keeps what it gave."""
    total, data = 0, raw
    while data:
        z = zlib.decompressobj(wbits=31)
        try:
            chunk = z.decompress(data, _CHUNK)
            while True:
                total += len(chunk)
                if total > cap:
                    raise LoadError(f"{name}: expands beyond {cap / 1e6:g} MB, the limit for a "
                                    "decompressed upload (ringscope view --max-expanded-mb)")
                out.write(chunk)
                if z.eof:
                    break
                rest = z.unconsumed_tail
                chunk = z.decompress(rest, _CHUNK)
                if not chunk and not rest:
                    break   # the input ended inside a member
        except zlib.error as exc:
            if total == 0:
                raise LoadError(f"{name}: not a readable gzip file ({exc})") from None
            break   # garbage after a member: keep what was expanded; the loader reports the cut
        if not z.eof:
            break   # cut off inside a member: the loader reports the truncated trace
        data = z.unused_data
    return total


def register(app, ctx):
    @app.callback(Output("banner", "children"), Output("banner", "className"),
                  Output("run-a", "data"), Output("run-b", "data"), Output("run-a", "value"),
                  Output("run-b", "value"),
                  Input("picker-open", "n_clicks"), Input("picker-path", "n_submit"),
                  Input("picker-list", "value"), Input("upload", "contents"),
                  State("picker-path", "value"), State("upload", "filename"), State("run-b", "value"),
                  prevent_initial_call=True)
    def bring_in(_clicks, _submit, listed, contents, typed, filename, run_b):
        trigger = dash_ctx.triggered_id
        owned = None
        try:
            if trigger == "upload":
                if not contents:
                    raise PreventUpdate
                path = save_upload(contents, filename, ctx.upload_dir, ctx.max_upload_bytes,
                                   ctx.max_expanded_bytes)
                owned, label = path.parent, safe_name(filename)
            else:
                rel = listed if trigger == "picker-list" else typed
                if not rel:
                    raise PreventUpdate
                path = resolve_under(ctx.root, rel)
                label = Path(rel).name if rel != "." else Path(ctx.root).name
            view = ctx.registry.add_path(path, label=label, owned_dir=owned).warm()
        except (PathRefused, LoadError) as exc:
            if owned is not None:
                shutil.rmtree(owned, ignore_errors=True)
            children, cls = banner("error", [f"Could not open: {exc}"])
            return children, cls, no_update, no_update, no_update, no_update
        kind = "warning" if view.notes else "ok"
        children, cls = banner(kind, [f"Loaded {view.label} as {view.id}"] + view.notes)
        options = ctx.registry.options()
        held = {o["value"] for o in options}
        return children, cls, options, options, view.id, (no_update if run_b in held or run_b is None else None)

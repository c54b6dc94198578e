"""The served dashboard in headless Chromium: confinement to the trace root through symlinks, a gzip
bomb upload refused at the cap without the server's memory following it, uploads evicted with their
folders, and the uploads' folder removed when the server stops."""
from __future__ import annotations

import gzip
import re
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.dashboard.conftest import SAMPLES, Server, free_port
from tests.dashboard.test_uploads import gzip_bomb

HEALTHY = SAMPLES / "healthy"
SECRET = b"allreduce.SECRETX.bias"


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    base = tmp_path_factory.mktemp("safety")
    outside = base / "outside"
    outside.mkdir()
    text = gzip.decompress((HEALTHY / "rank-00001.json.gz").read_bytes()).replace(b"allreduce.head.bias", SECRET)
    assert SECRET in text
    (outside / "rank-00001.json").write_bytes(text)
    root = base / "root"
    for run in ("good", "mixed"):
        (root / "runs" / run).mkdir(parents=True)
        shutil.copy(HEALTHY / "rank-00000.json.gz", root / "runs" / run)
    shutil.copy(HEALTHY / "rank-00001.json.gz", root / "runs" / "good")
    (root / "runs" / "mixed" / "rank-00001.json").symlink_to(outside / "rank-00001.json")
    return root


@pytest.fixture(scope="module")
def server(root, tmp_path_factory):
    port = free_port()
    argv = ["-m", "viewer.cli", "view", str(HEALTHY), "--port", str(port), "--root", str(root),
            "--max-upload-mb", "1", "--max-runs", "2"]
    srv = Server(argv, port, tmp_path_factory.mktemp("srv") / "log")
    yield srv
    srv.stop()


def uploads_dir(srv) -> Path:
    found = list(Path(tempfile.gettempdir()).glob(f"ringscope-uploads-{srv.proc.pid}-*"))
    assert len(found) == 1, found
    return found[0]


def peak_rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) / 1024


def overview_of(srv, run_id: str) -> str:
    """The overview page's body for ``run_id``, asked of the server as the browser's callback asks."""
    import json
    import urllib.request

    payload = {"output": "overview-body.children", "outputs": {"id": "overview-body", "property": "children"},
               "inputs": [{"id": "tabs", "property": "value", "value": "overview"},
                          {"id": "run-a", "property": "value", "value": run_id}],
               "changedPropIds": ["run-a.value"]}
    req = urllib.request.Request(srv.url + "_dash-update-component", data=json.dumps(payload).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return resp.read().decode()


def banner_says(page, text: str):
    page.wait_for_function("(t) => document.querySelector('#banner').innerText.includes(t)", arg=text,
                           timeout=60_000)
    return page.inner_text("#banner")


def test_a_symlink_inside_a_run_directory_to_an_outside_trace_is_refused(server, page, artifacts):
    page.goto(server.url)
    page.wait_for_selector("#card-straggler .card-value", timeout=60_000)
    page.fill("#picker-path", "runs/mixed")
    page.click("#picker-open")
    text = banner_says(page, "refused")
    assert "runs/mixed/rank-00001.json: a symlink leads outside the trace root" in text
    assert "error" in page.get_attribute("#banner", "class")
    page.screenshot(path=str(artifacts / "symlink-refused.png"))
    page.click("#tab-negotiation")
    page.wait_for_selector("#neg-heatmap .main-svg .hm", timeout=30_000, state="attached")
    assert SECRET.decode() not in page.content()
    page.fill("#picker-path", "runs/good")   # the same layout without the link opens
    page.click("#picker-open")
    assert "Loaded good" in banner_says(page, "Loaded good")
    assert page.errors == []


def test_a_gzip_bomb_upload_is_refused_at_the_cap(server, page, tmp_path, artifacts):
    page.goto(server.url)
    page.wait_for_selector("#card-straggler .card-value", timeout=60_000)
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip_bomb(512 << 20))   # 512 MiB expanded, about 0.5 MB uploaded
    before = peak_rss_mb(server.proc.pid)
    page.set_input_files("#upload input[type=file]", str(bomb))
    text = banner_says(page, "bomb.json.gz")
    assert "expands beyond 4 MB, the limit for a decompressed upload" in text
    assert "error" in page.get_attribute("#banner", "class")
    page.screenshot(path=str(artifacts / "gzip-bomb-refused.png"))
    assert peak_rss_mb(server.proc.pid) - before < 100   # not the 512 MiB it expands to
    assert list(uploads_dir(server).iterdir()) == []     # nothing of it kept
    assert page.errors == []


def test_uploads_are_evicted_with_their_folders_and_removed_at_exit(root, tmp_path, browser, artifacts):
    port = free_port()
    argv = ["-m", "viewer.cli", "view", str(HEALTHY), "--port", str(port), "--root", str(root),
            "--max-runs", "2"]
    srv = Server(argv, port, tmp_path / "log")
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        page.goto(srv.url)
        page.wait_for_selector("#card-straggler .card-value", timeout=60_000)
        folders = []
        for n in range(4):
            up = tmp_path / f"up{n}.json.gz"
            shutil.copy(HEALTHY / f"rank-0000{n}.json.gz", up)
            page.set_input_files("#upload input[type=file]", str(up))
            banner_says(page, f"Loaded up{n}.json.gz")
            folders.append({p.name for p in uploads_dir(srv).iterdir()})
        held = uploads_dir(srv)
        # the startup run is pinned; two uploads stay; each older upload's folder went with it
        assert [len(f) for f in folders] == [1, 2, 2, 2]
        assert {p.name for p in held.iterdir()} == folders[3] and len(folders[3] & folders[2]) == 1
        assert not folders[3] & folders[1]
        page.click("#run-a")
        page.wait_for_selector("[role=option]", timeout=10_000)
        options = " ".join(page.locator("[role=option]").all_inner_texts())
        assert "up3.json.gz" in options and "up2.json.gz" in options and "up0.json.gz" not in options
        page.screenshot(path=str(artifacts / "uploads-evicted.png"))
        # a browser still showing an evicted run (run2: up0) is told so rather than left stale
        body = overview_of(srv, "run2")
        assert "up0.json.gz (run2) was unloaded to make room for newer runs" in body
    finally:
        context.close()
        srv.stop()
    assert srv.proc.returncode == 0 and not held.exists()

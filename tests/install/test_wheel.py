"""The analyst's install: ringscope's binary wheel, built here, in a fresh venv with no C compiler reachable.

The venv sees the wheel's dependencies (and theirs), and nothing else: a folder of links to exactly those
distributions of the project's venv, named in a .pth file (pip's index is off: nothing is downloaded). So torch
and mpi4py are absent, as on an analyst's laptop, and ``pip install --no-index`` fails if the wheel declares a
dependency that is not there. ``PATH`` holds only the venv's bin and ``CC=false``: a build would fail."""
from __future__ import annotations

import email
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "sample_traces" / "straggler"


def requirements_of(wheel: Path) -> list[str]:
    """The wheel's own dependencies (Requires-Dist without an extra)."""
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        reqs = email.message_from_bytes(z.read(meta)).get_all("Requires-Dist") or []
    return [r for r in reqs if not Requirement(r).marker or Requirement(r).marker.evaluate({"extra": ""})]


def closure(requirements: list[str]) -> dict[str, metadata.Distribution]:
    """The installed distributions that ``requirements`` need, with theirs, recursively (no extras)."""
    found: dict[str, metadata.Distribution] = {}
    todo = [Requirement(r).name for r in requirements]
    while todo:
        name = canonicalize_name(todo.pop())
        if name in found:
            continue
        found[name] = dist = metadata.distribution(name)
        for r in dist.requires or []:
            req = Requirement(r)
            if not req.marker or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return found


def link_distributions(dists, into: Path) -> None:
    """Links in ``into`` to each distribution's top-level files and folders (its dist-info included)."""
    into.mkdir()
    for dist in dists:
        site = Path(dist.locate_file(""))
        for top in {f.parts[0] for f in dist.files or () if f.parts[0] != ".."}:
            if (site / top).exists() and not (into / top).exists():
                (into / top).symlink_to(site / top)


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A fresh venv holding the wheel built from this checkout, without a compiler: (its bin, the env, the tmp)."""
    tmp = tmp_path_factory.mktemp("wheel")
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "-o", str(tmp / "dist"), str(REPO)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    wheel = next((tmp / "dist").glob("ringscope-*.whl"))
    print(f"wheel built in {time.perf_counter() - t0:.1f} s: {wheel.name}")
    assert not wheel.name.endswith("-none-any.whl")   # a binary wheel: the C modules are in it

    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp / "venv")], check=True, timeout=120)
    link_distributions(closure(requirements_of(wheel)).values(), tmp / "deps")
    site = next((tmp / "venv" / "lib").glob("python*/site-packages"))
    (site / "deps.pth").write_text(f"{tmp / 'deps'}\n")
    bin_ = tmp / "venv" / "bin"
    env = {**os.environ, "PATH": str(bin_), "CC": "false", "CXX": "false"}
    env.pop("PYTHONPATH", None)
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(bin_ / "python"), "install", "-q", "--no-index",
                        str(wheel)], env=env, cwd=tmp, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr   # e.g. a dependency the wheel declares and the venv lacks
    print(f"venv and install in {time.perf_counter() - t0:.1f} s")
    return bin_, env, tmp


def run(venv, *argv, cwd=None, timeout=120):
    bin_, env, tmp = venv
    return subprocess.run([str(bin_ / argv[0]), *argv[1:]], env=env, cwd=cwd or tmp, capture_output=True,
                          text=True, timeout=timeout)


# One interpreter for the costly part (the imports of pandas and dash): the console script's own function runs
# summarize, then the dashboard's app answers its page and its assets through Flask's test client.
SMOKE = """
import json, sys
from viewer.cli import main
from viewer.dashboard.app import make_app
rc = main(["summarize", sys.argv[1]])
client = make_app([sys.argv[1]]).server.test_client()
got = {url: client.get(url) for url in ("/", "/_dash-layout", "/assets/style.css")}
print(json.dumps({"rc": rc, "status": {u: r.status_code for u, r in got.items()},
                  "css": len(got["/assets/style.css"].data), "record_loaded": "tracer._record" in sys.modules,
                  "viewer": sys.modules["viewer"].__file__}))
"""


def test_the_wheel_runs_summarize_and_the_dashboard_without_a_compiler(venv):
    bin_, env, tmp = venv
    assert not shutil.which("gcc", path=env["PATH"]) and not shutil.which("cc", path=env["PATH"])
    r = run(venv, "ringscope", "--version")
    assert r.returncode == 0 and r.stdout.strip() == f"ringscope {metadata.version('ringscope')}", r.stderr
    r = run(venv, "python", "-c", SMOKE, str(SAMPLE))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert r.stdout.startswith("Rank 3 is the straggler")
    got = json.loads(r.stdout.splitlines()[-1])
    assert got["rc"] == 0 and set(got["status"].values()) == {200} and got["css"] > 0   # assets are package data
    # the wheel's code ran, and the viewer never loaded the runtime's C module (which the wheel has all the same)
    assert got["viewer"].startswith(str(tmp / "venv")) and not got["record_loaded"]
    r = run(venv, "python", "-c", "import importlib.util as u; print(all(u.find_spec(m) for m in "
            "('tracer._record', 'collectives._core', 'collectives._round', 'viewer.io._eventscan')))")
    assert r.stdout.strip() == "True", r.stderr


def test_a_missing_extra_is_one_line_with_the_fix(venv):
    r = run(venv, "ringscope", "run", "-np", "2", "train.py")
    assert r.returncode == 2 and r.stderr.strip() == \
        "ringscope run: needs ringscope's runtime extra: pip install 'ringscope[runtime]'"
    r = run(venv, "ringscope", "demo", "--no-view")
    assert r.returncode == 2 and "pip install 'ringscope[runtime,torch]'" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = run(venv, "ringscope", "summarize", str(SAMPLE), "--no-cache", "--scheduler", "local")
    assert r.returncode == 2 and r.stderr.strip() == \
        "ringscope summarize: needs distributed: pip install 'ringscope[cluster]'"


def test_a_checkout_that_shadows_the_install_says_the_fix(venv, tmp_path):
    """Run from a source checkout's root that was never built: its tracer/ and viewer/ come first."""
    checkout = tmp_path / "checkout"
    for name in ("collectives", "tracer", "viewer"):
        shutil.copytree(REPO / name, checkout / name, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    (checkout / "setup.py").write_text("")
    r = run(venv, "python", "-m", "viewer.cli", "summarize", str(SAMPLE), cwd=checkout)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "viewer.io._eventscan" in r.stderr and f"pip install -e {checkout}" in r.stderr


def test_a_project_folder_named_like_a_package_says_so(venv, tmp_path):
    """A user's own tracer/ in the working directory would be imported by `ringscope run`'s ranks."""
    (tmp_path / "tracer").mkdir()
    (tmp_path / "tracer" / "__init__.py").write_text("")
    r = run(venv, "ringscope", "run", "-np", "2", "train.py", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.startswith(f"ringscope: {tmp_path / 'tracer'} is not ringscope's")


def test_a_distribution_written_over_a_package_says_which(venv):
    """What `pip install tracer` (a PyPI distribution of that name) does: its tracer/__init__.py over ours."""
    site = next((venv[2] / "venv" / "lib").glob("python*/site-packages"))
    init, info = site / "tracer" / "__init__.py", site / "tracer-2.0.0.dist-info"
    ours = init.read_bytes()
    info.mkdir()
    try:
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tracer\nVersion: 2.0.0\n")
        (info / "RECORD").write_text("tracer/__init__.py,,\ntracer-2.0.0.dist-info/METADATA,,\n")
        init.write_text('"""Centralized sys.settrace management"""\n')
        r = run(venv, "ringscope", "summarize", str(SAMPLE))
    finally:
        init.write_bytes(ours)
        shutil.rmtree(info)
    assert r.returncode == 2 and r.stderr.strip() == "ringscope: another distribution ('tracer') wrote its files " \
        "over ringscope's 'tracer' package: pip uninstall tracer && pip install --force-reinstall ringscope"

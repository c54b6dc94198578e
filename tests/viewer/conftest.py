"""Shared fixtures: paths to the real Horovod timelines (../shared) and the sample traces."""
from __future__ import annotations

import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HOROVOD_DIR = ROOT.parent / "shared" / "horovod_timelines"
SAMPLES = ROOT / "sample_traces"
HOROVOD_FILES = {
    "modern_1rank": "modern_mpi_broadcast_1rank.json",
    "legacy_7ranks": "legacy_nccl_fused_7ranks.json",
    "mpi_2ranks": "horovod0281_mpi_2ranks.json",
    "gloo_2ranks": "horovod0281_gloo_2ranks.json",
}


def horovod_file(key: str) -> Path:
    """Path of one real Horovod timeline, or skip the test with a visible reason."""
    p = HOROVOD_DIR / HOROVOD_FILES[key]
    if not p.exists():
        pytest.skip(f"real Horovod timelines not present at {HOROVOD_DIR} (../shared is absent)")
    return p


@pytest.fixture
def no_cache(tmp_path, monkeypatch):
    """Keep the parse cache inside the test's tmp dir."""
    monkeypatch.setenv("RINGSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RINGSCOPE_CACHE_DIR", str(tmp_path / "_cache"))
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        yield

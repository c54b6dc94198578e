"""Uploads are bounded: a gzip expands streamed to disk up to a cap, and an upload's folder goes
with its run when the registry evicts it (or with the server's folder at exit)."""
from __future__ import annotations

import base64
import gzip
import zlib

import pytest

from tests.dashboard.conftest import SAMPLES
from viewer.dashboard.callbacks_inputs import expand_gzip, save_upload
from viewer.dashboard.registry import LoadError, Registry

RANK0 = SAMPLES / "healthy" / "rank-00000.json.gz"


def data_url(raw: bytes) -> str:
    return "data:application/gzip;base64," + base64.b64encode(raw).decode()


def gzip_bomb(expanded: int, chunk: int = 1 << 22) -> bytes:
    """A gzip member of ``expanded`` spaces inside a JSON array, compressed a chunk at a time (the
    expanded bytes are never held whole)."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [z.compress(b"[")]
    block = b" " * chunk
    left = expanded - 2
    while left > 0:
        parts.append(z.compress(block[:min(chunk, left)]))
        left -= chunk
    parts.append(z.compress(b"]") + z.flush())
    return b"".join(parts)


def test_a_gzip_bomb_is_refused_at_the_cap_and_leaves_nothing_behind(tmp_path):
    bomb = gzip_bomb(1 << 30)   # 1 GiB expanded, about 1 MB on the wire
    assert len(bomb) < 1_100_000
    with pytest.raises(LoadError, match=r"bomb.json.gz: expands beyond 4 MB, the limit for a decompressed"):
        save_upload(data_url(bomb), "bomb.json.gz", tmp_path, max_bytes=2_000_000, max_expanded=4_000_000)
    assert list(tmp_path.iterdir()) == []   # its folder was removed


def test_the_default_cap_is_four_times_the_upload_limit(tmp_path):
    bomb = gzip_bomb(9_000_000)
    with pytest.raises(LoadError, match="expands beyond 8 MB"):
        save_upload(data_url(bomb), "b.json.gz", tmp_path, max_bytes=2_000_000)
    ok = save_upload(data_url(gzip_bomb(7_000_000)), "b.json.gz", tmp_path, max_bytes=2_000_000)
    assert ok.name == "b.json" and ok.stat().st_size == 7_000_000


def test_a_real_trace_expands_to_the_same_bytes_and_every_member_is_kept(tmp_path):
    raw = RANK0.read_bytes()
    path = save_upload(data_url(raw), RANK0.name, tmp_path, max_bytes=10_000_000)
    assert path.name == "rank-00000.json" and path.read_bytes() == gzip.decompress(raw)
    two = gzip.compress(b'{"traceEvents": [') + gzip.compress(b"]}")   # a multi-member gzip
    path = save_upload(data_url(two), "two.json.gz", tmp_path, max_bytes=10_000_000)
    assert path.read_bytes() == b'{"traceEvents": []}'


def test_corrupt_and_cut_gzip(tmp_path):
    with pytest.raises(LoadError, match="x.json.gz: not a readable gzip file"):
        save_upload(data_url(b"\x1f\x8b" + b"\x00" * 40), "x.json.gz", tmp_path, max_bytes=1000)
    raw = RANK0.read_bytes()
    cut = save_upload(data_url(raw[: len(raw) // 2]), "cut.json.gz", tmp_path, max_bytes=10_000_000)
    whole = gzip.decompress(raw)
    got = cut.read_bytes()
    assert 0 < len(got) < len(whole) and whole.startswith(got)   # what the stream gave is kept


def test_expand_gzip_streams_in_chunks(tmp_path):
    class Sink:
        biggest = 0

        def write(self, b):
            Sink.biggest = max(Sink.biggest, len(b))

    assert expand_gzip(gzip_bomb(50_000_000), Sink(), 60_000_000, "b") == 50_000_000
    assert Sink.biggest <= 1 << 20


def _uploaded(registry, tmp_path, n):
    raw = RANK0.read_bytes()
    path = save_upload(data_url(raw), f"up{n}.json.gz", tmp_path, max_bytes=10_000_000)
    return registry.add_path(path, label=f"up{n}", owned_dir=path.parent)


def test_registry_evicts_least_recently_used_uploads_and_removes_their_folders(tmp_path, monkeypatch):
    cache = tmp_path.parent / (tmp_path.name + "-cache")
    monkeypatch.setenv("RINGSCOPE_CACHE_DIR", str(cache))
    reg = Registry(max_runs=2)
    pinned = reg.add_path(SAMPLES / "healthy", pin=True)
    a, b = _uploaded(reg, tmp_path, 1), _uploaded(reg, tmp_path, 2)
    assert reg.get(a.id) is a   # a is now used more recently than b
    c = _uploaded(reg, tmp_path, 3)
    assert reg.get(b.id) is None and reg.evicted[b.id] == "up2"
    assert not b.owned_dir.exists() and a.owned_dir.exists() and c.owned_dir.exists()
    assert reg.get(pinned.id) is pinned   # startup runs stay
    assert [o["value"] for o in reg.options()] == [pinned.id, a.id, c.id]
    assert len(list(tmp_path.iterdir())) == 2
    # an upload is parsed once: no parse cache beside it nor in the cache directory
    assert [p.name for p in a.owned_dir.iterdir()] == ["up1.json"]
    assert [p.name for p in cache.iterdir() if p.name.startswith("up")] == []
    assert any(p.name.startswith("rank-00000.json.gz") for p in cache.iterdir())   # the pinned run's


def test_registry_evicts_by_table_bytes(tmp_path):
    first = _uploaded(Registry(), tmp_path, 0)
    reg = Registry(max_runs=100, max_bytes=int(first.nbytes * 2.5))
    views = [_uploaded(reg, tmp_path, n) for n in range(1, 5)]
    held = [v for v in views if reg.get(v.id) is not None]
    assert held == views[-2:] and first.nbytes > 100_000
    assert all(not v.owned_dir.exists() for v in views[:2])

"""The picker stays inside the trace root: '..', absolute paths and escaping symlinks are refused."""
import pytest

from viewer.dashboard.paths import PathRefused, list_runs, resolve_under


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "root"
    (r / "runs" / "a").mkdir(parents=True)
    (r / "runs" / "a" / "rank0.json").write_text("{}")
    (r / "runs" / "empty").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.json").write_text("{}")
    (r / "escape").symlink_to(outside, target_is_directory=True)
    (r / "inner").symlink_to(r / "runs" / "a", target_is_directory=True)
    return r


def test_inside_paths_resolve(root):
    assert resolve_under(root, "runs/a") == (root / "runs" / "a").resolve()
    assert resolve_under(root, "runs/a/rank0.json").name == "rank0.json"
    assert resolve_under(root, "inner") == (root / "runs" / "a").resolve()  # symlink staying inside


@pytest.mark.parametrize("rel, why", [
    ("../outside", "'..'"), ("runs/../../outside", "'..'"), ("/etc", "absolute"),
    ("~/x", "absolute"), ("escape", "symlink"), ("escape/secret.json", "symlink"),
    ("nope", "no such"), ("", "no path")])
def test_outside_paths_are_refused(root, rel, why):
    with pytest.raises(PathRefused, match=why):
        resolve_under(root, rel)


def test_list_runs_finds_trace_dirs_and_skips_symlinks(root):
    assert list_runs(root) == ["runs/a"]


def test_a_run_directory_holding_a_symlink_to_an_outside_trace_is_refused(root, tmp_path):
    (root / "runs" / "a" / "rank1.json").symlink_to(tmp_path / "outside" / "secret.json")
    with pytest.raises(PathRefused, match="runs/a/rank1.json: a symlink leads outside"):
        resolve_under(root, "runs/a")
    with pytest.raises(PathRefused, match="symlink"):
        resolve_under(root, "inner")   # the same directory through an inside link


def test_a_parse_cache_leading_outside_is_refused(root, tmp_path):
    (root / "runs" / "a" / ".ringscope-cache").symlink_to(tmp_path / "outside", target_is_directory=True)
    with pytest.raises(PathRefused, match=r"runs/a/\.ringscope-cache: a symlink"):
        resolve_under(root, "runs/a/rank0.json")
    (root / "runs" / "a" / ".ringscope-cache").unlink()
    entry = root / "runs" / "a" / ".ringscope-cache" / "rank0.json-abc"
    entry.mkdir(parents=True)
    (entry / "events.parquet").symlink_to(tmp_path / "outside" / "secret.json")
    with pytest.raises(PathRefused, match="events.parquet: a symlink"):
        resolve_under(root, "runs/a")


def test_a_symlink_loop_is_refused(root):
    (root / "loop").symlink_to(root / "loop")
    with pytest.raises(PathRefused, match="loop"):
        resolve_under(root, "loop")


def test_an_elastic_run_with_a_generation_leading_outside_is_refused(root, tmp_path):
    run = root / "runs" / "elastic"
    (run / "gen-000").mkdir(parents=True)
    (run / "elastic.json").write_text("{}")
    (run / "gen-000" / "rank-00000.json").write_text("{}")
    assert resolve_under(root, "runs/elastic") == run.resolve()
    (run / "gen-000" / "rank-00001.json").symlink_to(tmp_path / "outside" / "secret.json")
    with pytest.raises(PathRefused, match="runs/elastic/gen-000/rank-00001.json: a symlink leads outside"):
        resolve_under(root, "runs/elastic")
    (run / "gen-000" / "rank-00001.json").unlink()
    (run / "gen-001").symlink_to(tmp_path / "outside", target_is_directory=True)
    with pytest.raises(PathRefused, match="runs/elastic/gen-001: a symlink leads outside"):
        resolve_under(root, "runs/elastic")

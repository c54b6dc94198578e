"""A real job with the real tracer: per-rank files whose response ids agree across ranks."""
import json
from collections import defaultdict

from tests.mpi_util import SCRIPTS, run_mpi


def _events(path):
    return json.loads(path.read_text())["traceEvents"]


def test_timeline_files_agree_across_ranks(tmp_path):
    proc = run_mpi(3, [SCRIPTS / "runtime_timeline.py"], timeout=90,
                   env={"RINGSCOPE_TIMELINE": tmp_path / "tl.json",
                        "RINGSCOPE_CYCLE_TIME": 20})   # generous, so fusion happens even on a busy host
    assert proc.returncode == 0, proc.stdout
    files = sorted(tmp_path.glob("*.json"))
    assert len(files) == 3, files
    by_rank = {}
    for f in files:
        data = json.loads(f.read_text())
        rank = data["otherData"]["ringscope"]["rank"]
        responses = {}
        tensors = defaultdict(list)
        queued = []
        for e in data["traceEvents"]:
            if e.get("name") == "FUSED_RESPONSE":
                a = e["args"]
                responses[a["response"]] = (tuple(a["tensors"]), a["step"])
                queued.append(a.get("queue_ns"))
            elif e.get("cat") == "tensor":   # X, or B then E when a flush came mid-op
                tensors[e["name"]].append(e["ph"])
        by_rank[rank] = responses
        for name in ("grad.0", "grad.7", "grad.big", "params"):
            phs = tensors[name]
            assert len(phs) - phs.count("E") == 3 and phs.count("B") == phs.count("E"), \
                (rank, name, phs)
        # the QUEUE phase is the response's (ns from its arrival to its start)
        assert queued and all(isinstance(q, int) and q >= 0 for q in queued), queued
        assert "QUEUE" not in tensors and not any(n.startswith("NEGOTIATE_") for n in tensors)
    assert by_rank[0] and by_rank[0] == by_rank[1] == by_rank[2]
    steps = {s for _, s in by_rank[0].values()}
    assert steps == {0, 1, 2}, steps
    assert max(len(t) for t, _ in by_rank[0].values()) > 1, "nothing was fused"


def test_start_stop_timeline_records_only_the_window(tmp_path):
    proc = run_mpi(2, [SCRIPTS / "runtime_timeline_window.py", tmp_path / "w.json"], timeout=90)
    assert proc.returncode == 0, proc.stdout
    files = sorted(tmp_path.glob("*.json"))
    assert len(files) == 2, files
    for f in files:
        events = _events(f)
        names = {e.get("name") for e in events}
        assert "during" in names and "CYCLE" in names, sorted(n for n in names if n)[:20]
        assert "before" not in names and "after" not in names
        # stop_timeline follows the last op at once: its end is in the file; every end carries
        # its begin's step
        slices = [(e["ph"], e["args"]["step"]) for e in events
                  if e.get("name") == "during" and e.get("cat") == "tensor"]
        whole = sorted(s for ph, s in slices if ph == "X") + \
            [s for ph, s in slices if ph == "B" and ("E", s) in slices]
        opened = sum(ph == "B" for ph, _ in slices)
        assert sorted(whole) == [0, 1, 2] and len(slices) == 3 + opened, slices

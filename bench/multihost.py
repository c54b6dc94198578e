"""Multihost group: flat ring against hierarchical allreduce (float32 sum, 1, 4 and 16 MiB) on a
rehearsal cluster of 2 hosts x 2 ranks whose host links run at 1 Gbit/s each way.

Brings the cluster up under the machine's cluster lock and always takes it down; one job runs both
variants alternated rep by rep (``multihost_worker.py``). Needs root (network namespaces): skipped
with the reason otherwise, or when someone else's cluster is up.
"""
from __future__ import annotations

import fcntl
import sys

from bench import stats
from bench.launch import ROOT, BenchError, run_json, run_text

LOCK = "/tmp/ringscope-cluster.lock"   # the one tests/cluster/conftest.py holds
HOSTS, SLOTS, RATE = 2, 2, "1gbit"
MIB = (1, 4, 16)


def _skip(reason: str) -> dict:
    return {"rows": [], "metrics": {}, "notes": [reason], "skipped": reason}


def run(quick: bool) -> dict:
    from collectives import cluster
    problem = cluster.root_problem()
    if problem:
        return _skip(f"skipped: the rehearsal cluster {problem}")
    reps, block = (3, 0.2) if quick else (7, 0.4)
    cmd = [sys.executable, "-m", "viewer.cli", "run", "-np", str(HOSTS * SLOTS), "-H",
           ",".join(f"h{k}:{SLOTS}" for k in range(HOSTS)), "--cluster", "--backend", "ring",
           str(ROOT / "bench" / "multihost_worker.py"), "--mib", ",".join(map(str, MIB)),
           "--reps", str(reps), "--block-s", str(block)]
    env = {"RINGSCOPE_TIMELINE": None, "RINGSCOPE_HIERARCHICAL_ALLREDUCE": None,
           "HOROVOD_HIERARCHICAL_ALLREDUCE": None, "RINGSCOPE_FUSION_THRESHOLD": None}
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if cluster.read_state() is not None:
            return _skip("skipped: a ringscope cluster is up already (not this bench's): left alone")
        try:
            cluster.up(HOSTS, SLOTS, RATE)
            res = run_json(cmd, timeout=300 if quick else 600, env=env, label="multihost_worker.py")
            res["flat_finding"] = _flat_run_finding(env)
        except (BenchError, cluster.ClusterError) as exc:
            return {"rows": [], "metrics": {}, "notes": [str(exc)]}
        finally:
            cluster.down()
    return summarize(res)


def _flat_run_finding(env: dict) -> str:
    """What ``ringscope summarize`` says of the link on a traced flat run of the demo's job here."""
    import json
    import tempfile

    hosts = ",".join(f"h{k}:{SLOTS}" for k in range(HOSTS))
    with tempfile.TemporaryDirectory() as tmp:
        run_text([sys.executable, "-m", "viewer.cli", "run", "-np", str(HOSTS * SLOTS), "-H", hosts, "--cluster",
                  "--timeline", f"{tmp}/", "collectives/torch/demo_train.py", "--scenario", "healthy",
                  "--steps", "6"], timeout=300, env=env, label="demo_train.py (flat, traced)")
        out = run_text([sys.executable, "-m", "viewer.cli", "summarize", tmp, "--json"], timeout=120,
                       label="summarize")
    findings = json.loads(out[out.index("{"):out.rindex("}") + 1])["findings"]   # stderr may hold notes
    slow = [f["message"] for f in findings if f["kind"] == "slow_link"]
    return slow[0] if slow else "no slow_link finding (kinds: " + ", ".join(f["kind"] for f in findings) + ")"


def summarize(res: dict) -> dict:
    rows, metrics = [], {}
    n = res["ranks"]
    for nbytes, t in sorted(res["sizes"].items(), key=lambda kv: int(kv[0])):
        s = int(nbytes)
        flat, hier = stats.median(t["flat"]), stats.median(t["hierarchical"])
        ratio = stats.paired_ratio(t["flat"], t["hierarchical"])
        # bytes each host link carries each way: the flat ring's one hop out of the host moves
        # 2(n-1)/n of the buffer; hierarchically the host's shards cross once, the whole buffer
        # over 2 hosts (2(H-1)/H)
        hosts = res["hosts"]
        link = {"flat": 2 * (n - 1) / n * s, "hierarchical": 2 * (hosts - 1) / hosts * s}
        rows.append({"size": stats.human_bytes(s), "flat_ms": flat * 1e3, "hierarchical_ms": hier * 1e3,
                     "speedup": ratio, "flat_link_gbit": link["flat"] * 8 / flat / 1e9,
                     "hier_link_gbit": link["hierarchical"] * 8 / hier / 1e9})
        key = "multihost.hier_speedup" if s >= 4 << 20 else "multihost.small_hier_speedup"
        metrics[f"{key}.{stats.human_bytes(s).replace(' ', '')}"] = {
            "value": ratio,
            "detail": f"flat ring {flat * 1e3:.1f} ms / hierarchical {hier * 1e3:.1f} ms on {hosts} hosts x "
                      f"{n // hosts} ranks at {RATE} (per-rep range {stats.ratio_range(t['flat'], t['hierarchical'])})"}
    return {"rows": rows, "metrics": metrics, "raw": res,
            "notes": [f"{res['hosts']} namespaced hosts x {res['ranks'] // res['hosts']} ranks, host links "
                      f"{RATE} each way (tbf); link_gbit: what each host link carried each way per second",
                      f"summary of a traced flat run of the demo's job: {res.get('flat_finding')}"],
            "columns": ["size", "flat_ms", "hierarchical_ms", "speedup", "flat_link_gbit", "hier_link_gbit"]}

"""``ringscope query``: SQL over a run's store equals the loaded tables; CSV and JSON out; bad SQL is one line."""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from viewer import Run
from viewer.cli import query

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "sample_traces" / "two-hosts-slow-link"


def _query(capsys, tmp_path, sql, *extra):
    rc = query.main([str(RUN), sql, "--cache-dir", str(tmp_path / "store"), *extra])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_the_views_are_the_loaded_tables_on_the_common_axis(tmp_path, capsys):
    run = Run.load(RUN, cache=False)
    rc, out, err = _query(capsys, tmp_path, "SELECT rank, count(*) AS n, min(t_ns) AS first, sum(dur_ns) AS busy "
                          "FROM events GROUP BY rank ORDER BY rank", "--json")
    assert rc == 0 and err == ""
    g = run.events.groupby("rank")
    assert json.loads(out) == [{"rank": r, "n": int(g.size()[r]), "first": int(g["t_ns"].min()[r]),
                                "busy": int(g["dur_ns"].sum()[r])} for r in range(4)]
    rc, out, _ = _query(capsys, tmp_path, "SELECT rank, response, start_ns, end_ns, tensors FROM fused_ops "
                        "ORDER BY rank, response, start_ns", "--csv")
    rows = list(csv.reader(io.StringIO(out)))
    fo = run.fused_ops.sort_values(["rank", "response", "start_ns"])
    assert rows[0] == ["rank", "response", "start_ns", "end_ns", "tensors"] and len(rows) == len(fo) + 1
    assert [list(map(int, r[:4])) for r in rows[1:]] == fo[["rank", "response", "start_ns", "end_ns"]].values.tolist()
    rc, out, _ = _query(capsys, tmp_path, "SELECT rank, host, last_ts_ns FROM ranks", "--json")
    assert json.loads(out) == [{"rank": int(r), "host": h, "last_ts_ns": int(t)}
                               for r, h, t in run.ranks[["rank", "host", "last_ts_ns"]].values]


def test_the_text_table_and_bad_sql(tmp_path, capsys):
    rc, out, _ = _query(capsys, tmp_path, "SELECT host, count(*) AS ranks FROM ranks GROUP BY host ORDER BY host")
    assert rc == 0 and out.splitlines() == ["host  ranks", "----  -----", "h0    2", "h1    2", "(2 rows)"]
    rc, out, err = _query(capsys, tmp_path, "SELEC 1")
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("ringscope: query: Parser Error: syntax error")
    rc, out, err = _query(capsys, tmp_path, "SELECT * FROM no_table")
    assert rc == 2 and "no_table does not exist" in err and err.count("\n") == 1


def test_an_elastic_runs_views_number_occurrences_on_across_generations(tmp_path, capsys):
    run_dir = ROOT / "sample_traces" / "elastic"
    ops = Run.load(run_dir, cache=False).tensor_ops
    rc = query.main([str(run_dir), "SELECT count(*) AS n, max(occurrence) AS last FROM tensor_ops", "--json",
                     "--cache-dir", str(tmp_path / "store")])
    assert rc == 0 and json.loads(capsys.readouterr().out) == [{"n": len(ops), "last": int(ops["occurrence"].max())}]

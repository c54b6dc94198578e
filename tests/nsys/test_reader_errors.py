"""Malformed inputs give one-line errors naming the file and what is wrong."""
from __future__ import annotations

import sqlite3

import pytest

from viewer.errors import TraceError
from viewer.nsys.errors import NsysError
from viewer.nsys.reader import read_report


def _one_line(err, path, *words):
    msg = str(err)
    assert "\n" not in msg
    assert msg.startswith(str(path))
    for w in words:
        assert w in msg, msg


def test_not_sqlite(tmp_path):
    p = tmp_path / "report.sqlite"
    p.write_text('{"traceEvents": []}')
    with pytest.raises(NsysError) as e:
        read_report(p)
    _one_line(e.value, p, "not an SQLite file")
    assert isinstance(e.value, TraceError)     # the CLI's one error type


def test_nsys_rep_gets_export_hint(tmp_path):
    p = tmp_path / "report.nsys-rep"
    p.write_bytes(b"\x00\x01binary qdstrm")
    with pytest.raises(NsysError) as e:
        read_report(p)
    _one_line(e.value, p, "not an SQLite file", "nsys export --type sqlite")


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(NsysError) as e:
        read_report(tmp_path / "nope.sqlite")
    _one_line(e.value, tmp_path / "nope.sqlite", "no such file")
    with pytest.raises(NsysError) as e:
        read_report(tmp_path)
    _one_line(e.value, tmp_path, "directory")


def test_sqlite_without_nvtx_table(tmp_path):
    p = tmp_path / "other.sqlite"
    con = sqlite3.connect(p)
    con.execute("create table StringIds (id integer primary key, value text)")
    con.execute("create table TARGET_INFO_SESSION_START_TIME (utcEpochNs integer)")
    con.commit()
    con.close()
    with pytest.raises(NsysError) as e:
        read_report(p)
    _one_line(e.value, p, "missing table NVTX_EVENTS")


def test_unrelated_sqlite_names_every_missing_table(tmp_path):
    p = tmp_path / "app.db"
    con = sqlite3.connect(p)
    con.execute("create table users (id integer)")
    con.commit()
    con.close()
    with pytest.raises(NsysError) as e:
        read_report(p)
    _one_line(e.value, p, "StringIds", "NVTX_EVENTS", "TARGET_INFO_SESSION_START_TIME")


def test_truncated_sqlite(tmp_path):
    full = tmp_path / "full.sqlite"
    con = sqlite3.connect(full)
    con.execute("create table StringIds (id integer primary key, value text)")
    con.execute("create table TARGET_INFO_SESSION_START_TIME (utcEpochNs integer)")
    con.execute("create table NVTX_EVENTS (start integer, end integer, eventType integer, text text,"
                " globalTid integer)")
    con.executemany("insert into NVTX_EVENTS values (?,?,60,?,1)",
                    [(i, i + 5, f"range {i} " + "x" * 50) for i in range(20000)])
    con.commit()
    con.close()
    good = full.read_bytes()
    p = tmp_path / "cut.sqlite"
    p.write_bytes(good[:len(good) // 3])
    with pytest.raises(NsysError) as e:
        read_report(p)
    assert "\n" not in str(e.value) and str(e.value).startswith(str(p))


def test_nvtx_table_without_needed_columns(tmp_path):
    p = tmp_path / "old.sqlite"
    con = sqlite3.connect(p)
    con.execute("create table StringIds (id integer primary key, value text)")
    con.execute("create table TARGET_INFO_SESSION_START_TIME (utcEpochNs integer)")
    con.execute("insert into TARGET_INFO_SESSION_START_TIME values (1)")
    con.execute("create table NVTX_EVENTS (start integer, text text)")
    con.commit()
    con.close()
    with pytest.raises(NsysError) as e:
        read_report(p)
    _one_line(e.value, p, "NVTX_EVENTS lacks column", "eventType")


def test_wrong_typed_values_are_one_line(tmp_path, per_rank):
    """A text where nsys writes integers (a damaged or hand-edited export): one line, no traceback."""
    import shutil
    from pathlib import Path

    _truth, directory = per_rank
    src = sorted(Path(directory).glob("*.sqlite"))[0]
    bad = tmp_path / "bad.sqlite"
    shutil.copy(src, bad)
    con = sqlite3.connect(bad)
    con.execute("update CUPTI_ACTIVITY_KIND_KERNEL set start = 'not-a-time'")
    con.commit()
    con.close()
    with pytest.raises(NsysError) as ei:
        read_report(bad)
    _one_line(ei.value, bad, "unexpected value")

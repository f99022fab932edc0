"""The results store: round trip, duplicates, filters, and several writers at once."""

from __future__ import annotations

import subprocess
import sys

import pytest
from checkout import TESTS
from factories import T0, probe_result

from advisor.errors import AdvisorError
from advisor.store import ResultStore


def test_add_get_and_duplicates(tmp_path):
    with ResultStore(tmp_path / "r.db") as s:
        r = probe_result(n=1)
        assert s.add(r) is True
        assert s.add(r) is False  # same result_id: stored once
        assert s.count() == 1
        assert s.get(r.result_id[:8]) == r


def test_filters_and_newest_first(tmp_path):
    with ResultStore(tmp_path / "r.db") as s:
        for i in range(3):
            s.add(probe_result(n=i, instance_type="c7i.2xlarge"))
        s.add(probe_result(n=5, instance_type="g5.xlarge", model="resnet18"))
        got = s.results()
        assert [r.finished_at for r in got] == sorted((r.finished_at for r in got), reverse=True)
        assert len(s.results(instance_type="c7i.2xlarge")) == 3
        assert [r.workload.model for r in s.results(workload_id="resnet18-224px-1000c")] == ["resnet18"]


def test_unknown_and_ambiguous_ids_are_user_errors(tmp_path):
    with ResultStore(tmp_path / "r.db") as s:
        s.add(probe_result(n=0, result_id="ab" + "0" * 30))
        s.add(probe_result(n=1, result_id="ab" + "1" * 30))
        with pytest.raises(AdvisorError, match="ambiguous"):
            s.get("ab")
        with pytest.raises(AdvisorError, match="no result"):
            s.get("zz")


def test_a_file_that_is_not_sqlite_is_a_user_error(tmp_path):
    bad = tmp_path / "bad.db"
    bad.write_text("this is not a database, just text " * 100)
    with pytest.raises(AdvisorError, match="cannot be opened"):
        ResultStore(bad)


WRITER = """
import sys
sys.path.insert(0, {tests!r})
from factories import probe_result
from advisor.store import ResultStore
w = int(sys.argv[1])
with ResultStore({db!r}) as s:
    for i in range(50):
        assert s.add(probe_result(n=w * 100 + i))
"""


def test_eight_processes_writing_fifty_results_each_lose_nothing(tmp_path):
    db = tmp_path / "shared.db"
    code = WRITER.format(tests=str(TESTS), db=str(db))
    procs = [subprocess.Popen([sys.executable, "-c", code, str(w)], stderr=subprocess.PIPE, text=True)
             for w in range(8)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    with ResultStore(db) as s:
        assert s.count() == 400
        got = s.results()
        assert len({r.result_id for r in got}) == 400  # every row parses back as a valid result
        assert sorted(r.samples_per_sec for r in got) == sorted(40.0 + w * 100 + i for w in range(8) for i in range(50))


def test_newest_first_across_utc_offsets(tmp_path):
    from datetime import timedelta, timezone

    utc = probe_result(n=0, result_id="a" * 32).model_copy(
        update={"finished_at": T0.replace(hour=10)})
    # 11:30 at +02:00 is 09:30 UTC: older, though its text sorts later.
    plus2 = probe_result(n=1, result_id="b" * 32).model_copy(
        update={"finished_at": T0.replace(hour=11, minute=30, tzinfo=timezone(timedelta(hours=2)))})
    with ResultStore(tmp_path / "r.db") as s:
        s.add(plus2)
        s.add(utc)
        assert [r.result_id for r in s.results()] == ["a" * 32, "b" * 32]
        assert s.get("b").finished_at == plus2.finished_at  # the record itself keeps its offset


def test_id_prefix_is_literal_not_a_pattern(tmp_path):
    with ResultStore(tmp_path / "r.db") as s:
        s.add(probe_result(n=0, result_id="ab" + "0" * 30))
        for pattern in ("%", "_", "a_"):
            with pytest.raises(AdvisorError, match="no result"):
                s.get(pattern)
        assert s.get("ab").result_id.startswith("ab")


def test_a_store_that_cannot_be_written_is_a_user_error(tmp_path):
    with ResultStore(tmp_path / "r.db") as s:
        s._db.execute("PRAGMA query_only = ON")  # stands in for a read-only file (root ignores chmod)
        with pytest.raises(AdvisorError, match="cannot write"):
            s.add(probe_result(n=0))

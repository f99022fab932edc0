"""Read commands only read: `results list/show/export` and `recommend` open the store read-only,
create no folder or file, leave other applications' SQLite files exactly as they were, say
clearly when a store does not exist or is not one, and can read a store the user may not write."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from factories import probe_result
from recommend_catalogs import write_catalog
from unprivileged import run_as_reader, shared_dir

from advisor.store import ResultStore

RECOMMEND = ["recommend", "--budget", "500", "--deadline", "2d", "--samples", "1e8", "--format", "json",
             "--max-age", "100000"]


def reads(store: str, catalog: str) -> list[list[str]]:
    return [["results", "list", "--store", store], ["results", "export", "--store", store],
            ["results", "list", "--store", store, "--format", "csv"], ["results", "show", "ab", "--store", store],
            [*RECOMMEND, "--catalog", catalog, "--store", store]]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def listing(folder: Path) -> list[str]:
    # conftest puts the advisor's cache dir here; recommend keeps its fitted model there, by design
    return sorted(p.name for p in folder.iterdir() if p.name != "cache")


def test_another_applications_sqlite_file_is_left_exactly_as_it_was(cli, tmp_path):
    other = tmp_path / "app.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
        db.execute("INSERT INTO notes (text) VALUES ('keep me')")
    before, files = digest(other), listing(tmp_path)
    catalog = write_catalog(tmp_path / "cat.json")
    files = listing(tmp_path)
    for argv in [*reads(str(other), catalog), ["results", "import", str(tmp_path / "cat.json"), "--store", str(other)]]:
        code, _, err = cli(*argv)
        assert code == 2 and "Traceback" not in err, (argv, err)
        assert "not a results store" in err or "not a probe result" in err, (argv, err)
    # a write command is refused too: no results table is added to someone else's database
    (tmp_path / "r.json").write_text(probe_result(n=0).model_dump_json())
    code, _, err = cli("results", "import", str(tmp_path / "r.json"), "--store", str(other))
    assert code == 2 and "not a results store" in err
    assert digest(other) == before and listing(tmp_path) == sorted([*files, "r.json"])
    with sqlite3.connect(other) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("delete",)  # never switched to WAL
        assert [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")] == ["notes"]


def test_a_results_table_that_is_not_ours_is_refused(cli, tmp_path):
    other = tmp_path / "app.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE results (id INTEGER, score REAL)")
    code, _, err = cli("results", "list", "--store", str(other))
    assert code == 2 and "not the advisor's" in err


def test_a_mistyped_store_path_creates_nothing(cli, tmp_path):
    catalog = write_catalog(tmp_path / "cat.json")
    missing = tmp_path / "no" / "such" / "dir" / "results.sqlite"
    for argv in reads(str(missing), catalog):
        code, _, err = cli(*argv)
        assert code == 2 and "does not exist" in err and err.count("\n") == 1, (argv, err)
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize("content", [b"", b"not a database at all " * 50, b"SQLite format 3\x00" + b"\xff" * 200])
def test_a_file_that_is_not_a_store_is_one_line(cli, tmp_path, content):
    bad = tmp_path / "bad.db"
    bad.write_bytes(content)
    before = digest(bad)
    for argv in reads(str(bad), write_catalog(tmp_path / "cat.json")):
        code, _, err = cli(*argv)
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, (argv, err)
    assert digest(bad) == before


def test_a_directory_as_store_is_one_line(cli, tmp_path):
    for argv in [["results", "list", "--store", str(tmp_path)],
                 ["results", "import", str(tmp_path / "x.json"), "--store", str(tmp_path)]]:
        code, _, err = cli(*argv)
        assert code == 2 and err.count("\n") <= 2 and "Traceback" not in err, err


def test_reading_a_rollback_journal_store_changes_nothing(cli, tmp_path):
    db_path = tmp_path / "r.db"
    with ResultStore(db_path) as s:
        s.add(probe_result(n=0, result_id="ab" + "0" * 30))
    with sqlite3.connect(db_path) as db:  # as an older version or another tool may have left it
        db.execute("PRAGMA journal_mode = DELETE")
    before, files = digest(db_path), listing(tmp_path)
    catalog = write_catalog(tmp_path / "cat.json")
    for argv in reads(str(db_path), catalog):
        code, _, err = cli(*argv)
        assert code == 0, (argv, err)
    assert digest(db_path) == before and listing(tmp_path) == sorted([*files, "cat.json"])
    with sqlite3.connect(db_path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("delete",)


def test_reading_a_wal_store_does_not_change_its_file(cli, tmp_path):
    db_path = tmp_path / "r.db"
    with ResultStore(db_path) as s:
        s.add(probe_result(n=0, result_id="ab" + "0" * 30))
    before = digest(db_path)
    for argv in reads(str(db_path), write_catalog(tmp_path / "cat.json")):
        code, _, err = cli(*argv)
        assert code == 0, (argv, err)
    assert digest(db_path) == before


def test_the_store_opened_read_only_cannot_write(tmp_path):
    db_path = tmp_path / "r.db"
    ResultStore(db_path).close()
    with ResultStore(db_path, readonly=True) as s:
        from advisor.errors import AdvisorError

        with pytest.raises(AdvisorError, match="cannot write"):
            s.add(probe_result(n=0))


# --- a store this user may only read: run as another user (root ignores file modes) ------------

@pytest.mark.parametrize("where", ["0444 file", "read-only folder"])
def test_a_store_the_user_may_only_read_is_readable(where):
    with shared_dir() as d:
        _readable_as_reader(d, where)


def _readable_as_reader(shared_dir: Path, where: str) -> None:
    folder = shared_dir / "store"
    folder.mkdir()
    folder.chmod(0o755)
    db_path = folder / "results.sqlite"
    with ResultStore(db_path) as s:  # WAL mode, as the probe writes it
        s.add(probe_result(n=0, result_id="ab" + "0" * 30))
        s.add(probe_result(n=1, result_id="cd" + "0" * 30))
    catalog = write_catalog(shared_dir / "cat.json")
    (shared_dir / "cat.json").chmod(0o644)
    db_path.chmod(0o444)
    if where == "read-only folder":
        folder.chmod(0o555)
    before, files = digest(db_path), listing(folder)
    for argv in reads(str(db_path), catalog):
        p = run_as_reader(argv, shared_dir)
        assert p.returncode == 0, (argv, p.stderr)
        assert "Traceback" not in p.stderr and "readonly database" not in p.stderr
    assert digest(db_path) == before
    if where == "read-only folder":
        assert listing(folder) == files
    p = run_as_reader(["results", "export", "--store", str(db_path)], shared_dir)
    assert p.stdout.count('"result_id"') == 2
    # writing is refused in one line, and the store is unchanged
    (shared_dir / "r.json").write_text(probe_result(n=5).model_dump_json())
    (shared_dir / "r.json").chmod(0o644)
    p = run_as_reader(["results", "import", str(shared_dir / "r.json"), "--store", str(db_path)], shared_dir)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert digest(db_path) == before

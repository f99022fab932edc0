"""The results store: one SQLite file of ProbeResults.

WAL mode and a generous busy timeout let several probe processes write at once; a result is
written in one transaction when the probe has finished, so an interrupted probe leaves no row.

Read commands open the store read-only (`ResultStore(path, readonly=True)`): no folder or file is
created, the journal mode is left alone, nothing is added to a file that is not a results store,
and a store the user may only read (a 0444 file, a read-only folder) can be listed. A row that no
longer validates (written by a hand, another version, a bug) is skipped and named, never fatal:
`advisor results delete ID` removes it.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import quote

if sys.version_info >= (3, 11):
    from typing import Self
else:  # Python 3.10
    from typing_extensions import Self

from lightning_module.contract.result import ProbeResult, ResultError, parse_result

from .errors import AdvisorError
from .output import safe_text

_SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    result_id       TEXT PRIMARY KEY,
    workload_id     TEXT NOT NULL,
    instance_type   TEXT,
    accelerator     TEXT NOT NULL,
    samples_per_sec REAL NOT NULL,
    finished_at     TEXT NOT NULL,
    torch_version   TEXT,
    json            TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS results_by_workload ON results (workload_id, instance_type, finished_at);
"""
# The columns the queries below read: a `results` table without them is someone else's.
_COLUMNS = {"result_id", "workload_id", "instance_type", "finished_at", "json"}
INVALID_ROWS_NAMED = 5  # a store with thousands of bad rows names the first few, then counts


class ResultStore:
    def __init__(self, path: str | Path | None = None, readonly: bool = False, create: bool = True):
        """path: default the advisor's own store (INSTANCE_ADVISOR_STORE, else the XDG data dir)."""
        if path is None:
            from .paths import default_store_path

            path = default_store_path()
        self.path = Path(path)
        self.invalid: list[tuple[str, str]] = []  # (row id, why) of rows skipped by the last read
        try:
            if (readonly or not create) and not self.path.exists():
                raise AdvisorError(f"results store {self.path} does not exist; give the file 'advisor probe' or "
                                "'advisor results import' wrote (--store)")
            self._db = self._open_readonly() if readonly else self._open_writable()
        except sqlite3.DatabaseError as e:
            raise AdvisorError(f"results store {self.path} cannot be opened: {e}; pass --store to use another file") from None
        except OSError as e:
            raise AdvisorError(f"results store {self.path}: {e.strerror or e}") from None

    def _open_writable(self) -> sqlite3.Connection:
        if self.path.is_dir():
            raise AdvisorError(f"results store {self.path} is a directory; pass --store FILE")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        db.execute("PRAGMA busy_timeout = 60000")
        tables = _tables(db)
        if tables and "results" not in tables:  # another application's database: leave it alone
            db.close()
            raise AdvisorError(f"{self.path} is an SQLite file but not a results store; pass --store to use another file")
        db.execute("PRAGMA journal_mode = WAL")
        db.executescript(_SCHEMA)
        self._check_schema(db)
        return db

    def _open_readonly(self) -> sqlite3.Connection:
        if not self.path.is_file():
            raise AdvisorError(f"results store {self.path} is not a file")
        uri = "file:" + quote(os.fsencode(self.path.resolve()))
        db = sqlite3.connect(uri + "?mode=ro", uri=True, timeout=60, isolation_level=None)
        try:
            tables = _tables(db)
        except sqlite3.OperationalError:
            # A WAL-mode store in a folder this user cannot write: SQLite cannot create the
            # shared-memory file a reader needs. `immutable` reads the file as it is (results
            # still in an uncheckpointed WAL are not seen; a writer here would need that folder).
            db.close()
            db = sqlite3.connect(uri + "?mode=ro&immutable=1", uri=True, isolation_level=None)
            tables = _tables(db)
        if "results" not in tables:
            db.close()
            raise AdvisorError(f"{self.path} is not a results store (no results table); pass --store to use another file")
        self._check_schema(db)
        return db

    def _check_schema(self, db: sqlite3.Connection) -> None:
        cols = {row[1] for row in db.execute("PRAGMA table_info(results)")}
        if not _COLUMNS <= cols:
            db.close()
            raise AdvisorError(f"{self.path} has a results table that is not the advisor's "
                            f"(missing {', '.join(sorted(_COLUMNS - cols))})")

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def add(self, result: ProbeResult) -> bool:
        """Insert one result; returns False when a result with the same id is already there."""
        try:
            cur = self._db.execute(
                "INSERT OR IGNORE INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    result.result_id,
                    result.workload_id,
                    result.instance_type,
                    result.config.accelerator,
                    result.samples_per_sec,
                    _sortable(result.finished_at),
                    result.software.torch,
                    result.model_dump_json(),
                ),
            )
        except sqlite3.Error as e:  # read-only file, full disk, locked past the busy timeout
            raise AdvisorError(f"results store {self.path}: cannot write: {e}") from None
        return cur.rowcount == 1

    def _rows(self, sql: str, args: list | tuple) -> list[tuple]:
        try:
            return self._db.execute(sql, args).fetchall()
        except sqlite3.Error as e:  # a damaged file ("database disk image is malformed")
            raise AdvisorError(f"results store {self.path} cannot be read: {e}") from None

    def _parse(self, rid, text) -> ProbeResult | None:
        """The row's result, or None (and the row named in self.invalid) when it does not validate."""
        where = f"store row {safe_text(rid, 80)}"
        try:
            if not isinstance(text, (str, bytes)):
                raise ResultError(f"{where}: no JSON record")
            return parse_result(text, where=where)
        except ResultError as e:
            self.invalid.append((str(rid), str(e)))
            return None

    def results(self, workload_id: str | None = None, instance_type: str | None = None) -> list[ProbeResult]:
        """Newest first. Rows that do not validate are skipped and kept in self.invalid
        (invalid_warnings() says them in words)."""
        sql, args = "SELECT result_id, json FROM results", []
        where = []
        if workload_id is not None:
            where.append("workload_id = ?")
            args.append(workload_id)
        if instance_type is not None:
            where.append("instance_type = ?")
            args.append(instance_type)
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY finished_at DESC"
        self.invalid = []
        return [r for rid, text in self._rows(sql, args) if (r := self._parse(rid, text)) is not None]

    def invalid_warnings(self) -> list[str]:
        """The rows the last read skipped, in words (the first few named, then a count)."""
        out = [f"skipped invalid {why.removeprefix('store ')}; 'advisor results delete {safe_text(rid, 80)}' removes it"
               for rid, why in self.invalid[:INVALID_ROWS_NAMED]]
        if len(self.invalid) > INVALID_ROWS_NAMED:
            out.append(f"and {len(self.invalid) - INVALID_ROWS_NAMED} more invalid rows skipped")
        return out

    def _match(self, result_id: str) -> list[tuple]:
        # Not LIKE: a '_' or '%' typed as part of an id would match any result.
        return self._rows("SELECT result_id, json FROM results WHERE substr(result_id, 1, ?) = ?",
                          (len(result_id), result_id))

    def _one(self, result_id: str) -> tuple:
        rows = self._match(result_id)
        exact = [r for r in rows if r[0] == result_id]
        if exact:
            return exact[0]
        if not rows:
            raise AdvisorError(f"no result with id {result_id!r}; 'advisor results list' shows the ids")
        if len(rows) > 1:
            raise AdvisorError(f"result id prefix {result_id!r} is ambiguous ({len(rows)} matches); give more characters")
        return rows[0]

    def get(self, result_id: str) -> ProbeResult:
        rid, text = self._one(result_id)
        self.invalid = []
        r = self._parse(rid, text)
        if r is None:
            raise AdvisorError(f"{self.invalid[0][1]}; 'advisor results delete {safe_text(rid, 80)}' removes it")
        return r

    def delete(self, result_ids: list[str]) -> list[str]:
        """Remove the results with these ids (or unique prefixes), all or none: an unknown or
        ambiguous id deletes nothing. Returns the full ids removed."""
        full = list(dict.fromkeys(self._one(i)[0] for i in result_ids))
        try:
            self._db.execute("BEGIN IMMEDIATE")
            for rid in full:
                self._db.execute("DELETE FROM results WHERE result_id = ?", (rid,))
            self._db.execute("COMMIT")
        except sqlite3.Error as e:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise AdvisorError(f"results store {self.path}: cannot delete: {e}") from None
        return full

    def count(self) -> int:
        return self._rows("SELECT COUNT(*) FROM results", ())[0][0]


def _tables(db: sqlite3.Connection) -> set[str]:
    return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _sortable(t: datetime) -> str:
    """UTC with a fixed-width fraction, so the text sorts in time order ("newest first") even for
    imported results stamped with another offset (11:30+02:00 is before 10:00+00:00)."""
    t = t.replace(tzinfo=timezone.utc) if t.tzinfo is None else t.astimezone(timezone.utc)
    return t.isoformat(timespec="microseconds")


__all__ = ["ResultError", "ResultStore"]

"""The results store: one SQLite file of ProbeResults.

WAL mode and a generous busy timeout let several probe processes write at once; a result is
written in one transaction when the probe has finished, so an interrupted probe leaves no row.
"""

from __future__ import annotations

import sqlite3
import sys
from datetime import datetime, timezone
from pathlib import Path

if sys.version_info >= (3, 11):
    from typing import Self
else:  # Python 3.10
    from typing_extensions import Self

from lightning_module.result import ProbeResult, ResultError, parse_result

from .errors import UserError

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


class ResultStore:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            self._db.execute("PRAGMA busy_timeout = 60000")
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as e:
            raise UserError(f"results store {self.path} cannot be opened: {e}; pass --store to use another file") from None
        except OSError as e:
            raise UserError(f"results store {self.path}: {e.strerror or e}") from None

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
            raise UserError(f"results store {self.path}: cannot write: {e}") from None
        return cur.rowcount == 1

    def results(self, workload_id: str | None = None, instance_type: str | None = None) -> list[ProbeResult]:
        """Newest first."""
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
        out = []
        for rid, text in self._db.execute(sql, args):
            out.append(parse_result(text, where=f"store row {rid}"))
        return out

    def get(self, result_id: str) -> ProbeResult:
        rows = self._db.execute(
            # Not LIKE: a '_' or '%' typed as part of an id would match any result.
            "SELECT result_id, json FROM results WHERE substr(result_id, 1, ?) = ?", (len(result_id), result_id)
        ).fetchall()
        if not rows:
            raise UserError(f"no result with id {result_id!r}; 'advisor results list' shows the ids")
        if len(rows) > 1:
            raise UserError(f"result id prefix {result_id!r} is ambiguous ({len(rows)} matches); give more characters")
        return parse_result(rows[0][1], where=f"store row {rows[0][0]}")

    def count(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM results").fetchone()[0]


def _sortable(t: datetime) -> str:
    """UTC with a fixed-width fraction, so the text sorts in time order ("newest first") even for
    imported results stamped with another offset (11:30+02:00 is before 10:00+00:00)."""
    t = t.replace(tzinfo=timezone.utc) if t.tzinfo is None else t.astimezone(timezone.utc)
    return t.isoformat(timespec="microseconds")


__all__ = ["ResultError", "ResultStore"]

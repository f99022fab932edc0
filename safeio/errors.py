"""The errors every reader and writer of safeio raises, and the one-line form of pydantic's."""

from __future__ import annotations

from typing import NamedTuple

from pydantic import ValidationError


class FileError(ValueError):
    """A file that cannot be read, parsed or written; the message is one line for the user."""


class FirstError(NamedTuple):
    """The first of pydantic's complaints about a document, for a one-line message."""

    loc: tuple  # pydantic's location of the value
    msg: str  # on one line, without pydantic's "Value error, " prefix
    more: int  # how many other complaints there were
    kind: str  # pydantic's error type (extra_forbidden, greater_than_equal, ...)

    @property
    def at(self) -> str:
        """The location as 'a.b.0.c', '(top)' for the document itself."""
        return ".".join(str(p) for p in self.loc) or "(top)"


def first_error(e: ValidationError) -> FirstError:
    """Every reader of a validated document (catalog, probe result, reference table, manifest,
    option) reports its first error through this, so they all read alike."""
    errs = e.errors()
    return FirstError(tuple(errs[0]["loc"]), " ".join(str(errs[0]["msg"]).removeprefix("Value error, ").split()),
                      len(errs) - 1, errs[0]["type"])

"""Reading and writing the advisor's files: catalogs, and the one safe JSON reader every JSON file
the advisor reads goes through (catalog, probe results, S3 objects, run manifests, the spot
advisor, the reference dataset). Bad files become one-line errors; writes are atomic."""

from __future__ import annotations

import gc
import json
import os
import tempfile
from pathlib import Path
from typing import NamedTuple

from pydantic import BaseModel, ValidationError

from .models import READABLE_VERSIONS, SCHEMA_VERSION, Catalog

SNAPSHOT_PATH = Path(__file__).parent / "data" / "snapshot.json"


class CatalogError(ValueError):
    """A catalog that cannot be read or built; the message is one line for the user."""


class FileError(ValueError):
    """A file that cannot be read, parsed or written; the message is one line for the user."""


# A full 30-region catalog is a few MB; a probe result a few KiB. Anything past these is not one
# of our files, and reading it whole would only cost memory.
CATALOG_MAX_BYTES = 256 * 2**20
# Our files hold small integers: 100 digits is past any count or price, and far below the 4,300
# digits at which Python's int() raises ValueError (and which take quadratic time to convert).
JSON_MAX_INT_DIGITS = 100


# Our files nest a handful of levels (a catalog's offers: 4). Python's own limit (a RecursionError
# somewhere near 1,000 levels, depending on the version and the stack) is no contract.
JSON_MAX_DEPTH = 64


def _too_deep(where: str) -> str:
    return f"{where}: JSON nested more than {JSON_MAX_DEPTH} levels deep: not one of the advisor's files"


def _check_depth(doc, where: str, error: type[Exception]) -> None:
    stack = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node
        for child in children:
            if isinstance(child, (dict, list)):
                if depth >= JSON_MAX_DEPTH:
                    raise error(_too_deep(where))
                stack.append((child, depth + 1))


def _json_int(s: str) -> int:
    if len(s.lstrip("-")) > JSON_MAX_INT_DIGITS:
        raise ValueError(f"an integer with {len(s.lstrip('-')):,} digits")
    return int(s)


def decode_text(data: str | bytes, where: str, error: type[Exception] = FileError) -> str:
    """The one text rule: every file the advisor reads is UTF-8 (a BOM allowed), decoded here before
    it is parsed; anything else is `error` "not UTF-8 text". json.loads alone would detect and read
    UTF-16 and UTF-32 too, which pydantic's parser (the catalog's) refuses: the readers disagreed.
    A NUL is never in our text (JSON forbids it unescaped): UTF-16/32 of ASCII decodes to NULs."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as e:
            raise error(f"{where}: not UTF-8 text (byte {e.start}: {e.reason}); save it as UTF-8") from None
    else:
        text = data
    if "\x00" in text:
        raise error(f"{where}: not UTF-8 text (NUL characters: UTF-16 or UTF-32?); save it as UTF-8") from None
    return text.removeprefix("\ufeff")


def parse_json(text: str | bytes, where: str, error: type[Exception] = FileError):
    """JSON text -> Python objects, or `error` with one line saying why: not UTF-8 (decode_text),
    invalid JSON, nested more than JSON_MAX_DEPTH levels (or deep enough for a RecursionError),
    integers too long. NaN, Infinity and 1e400 (inf) are read: the models refuse non-finite numbers
    field by field, which names the field."""
    text = decode_text(text, where, error)
    try:
        doc = json.loads(text, parse_int=_json_int)
    except RecursionError:
        raise error(_too_deep(where)) from None
    except json.JSONDecodeError as e:
        raise error(f"{where}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    except ValueError as e:  # from _json_int
        raise error(f"{where}: not valid JSON ({e})") from None
    if isinstance(doc, (dict, list)):
        _check_depth(doc, where, error)
    return doc


def read_bytes(path: str | Path, what: str, limit: int, error: type[Exception] = FileError) -> bytes:
    """A whole file, at most `limit` bytes, with one-line errors (missing, a directory, unreadable,
    too large) that name it as `what` ("catalog file", "probe result file")."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except FileNotFoundError:
        raise error(f"{what} {path} does not exist") from None
    except IsADirectoryError:
        raise error(f"{what} {path} is a directory, not a file") from None
    except OSError as e:
        raise error(f"{what} {path}: {e.strerror or e}") from None
    except ValueError:  # a NUL in the path: no file can have that name
        raise error(f"{what} {str(path)!r}: not a usable file name (it holds a NUL character)") from None
    if len(data) > limit:
        raise error(f"{what} {path} is larger than {limit / 2**20:g} MiB: not one of the advisor's files")
    return data


def read_text(path: str | Path, what: str, limit: int, error: type[Exception] = FileError) -> str:
    """read_bytes + decode_text: a whole text file, UTF-8 or a one-line error."""
    return decode_text(read_bytes(path, what, limit, error), f"{what} {path}", error)


def read_json_file(path: str | Path, what: str, limit: int, error: type[Exception] = FileError):
    """read_bytes + parse_json: the way to read any JSON file the advisor did not just write."""
    return parse_json(read_bytes(path, what, limit, error), f"{what} {path}", error)


def check_writable(path: str | Path, what: str, error: type[Exception] = FileError) -> Path:
    """Say now, before minutes of work, that `path` cannot be written: it is a directory, or the
    nearest existing folder above it is not a writable folder. Creates nothing."""
    path = Path(path)
    if path.is_dir():
        raise error(f"{what} {path}: that is a directory; give a file name")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise error(f"{what} {path}: {parent} is not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise error(f"{what} {path}: folder {parent} is not writable")
    return path


class FirstError(NamedTuple):
    """The first of pydantic's complaints about a document, for a one-line message."""

    loc: tuple  # pydantic's location of the value
    msg: str  # on one line, without pydantic's "Value error, " prefix
    more: int  # how many other complaints there were

    @property
    def at(self) -> str:
        """The location as 'a.b.0.c', '(top)' for the document itself."""
        return ".".join(str(p) for p in self.loc) or "(top)"


def first_error(e: ValidationError) -> FirstError:
    """Every reader of a validated document (catalog, probe result, reference table, manifest,
    option) reports its first error through this, so they all read alike."""
    errs = e.errors()
    return FirstError(tuple(errs[0]["loc"]), " ".join(str(errs[0]["msg"]).removeprefix("Value error, ").split()),
                      len(errs) - 1)


def load(path: str | Path) -> Catalog:
    return loads(read_bytes(path, "catalog file", CATALOG_MAX_BYTES, CatalogError), where=str(path))


def loads(text: str | bytes, where: str = "catalog") -> Catalog:
    # Validate straight from JSON (pydantic's parser is about twice as fast as json.loads +
    # validate); only a file that fails is parsed again, to say in one line what is wrong.
    # A full catalog allocates hundreds of thousands of acyclic objects; the cyclic collector
    # would run many passes over them mid-parse (about a third of the load time), for nothing.
    text = decode_text(text, where, CatalogError)  # the one text rule, before either parser
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return Catalog.model_validate_json(text)
    except ValidationError as e:
        first = first_error(e)
    finally:
        if gc_was_enabled:
            gc.enable()
    try:
        data = parse_json(text, where, CatalogError)
    except CatalogError as e:
        raise CatalogError(f"{e}; refresh it with 'advisor catalog refresh' or pass another --catalog") from None
    if not isinstance(data, dict) or "schema_version" not in data:
        raise CatalogError(f"{where} is not an instance-advisor catalog (no schema_version)")
    if data["schema_version"] not in READABLE_VERSIONS:
        raise CatalogError(
            f"{where} has catalog schema_version {data['schema_version']!r}, this advisor reads "
            f"{SCHEMA_VERSION}; run 'advisor catalog refresh' to rebuild it"
        )
    raise CatalogError(f"{where}: invalid catalog at {first.at}{_offer_name(data, first.loc)}: {first.msg}")


def _offer_name(data: dict, loc: tuple) -> str:
    """' (g5.xlarge spot)' for an error inside an offer column, so the user sees which offer."""
    if len(loc) != 4 or loc[0] != "offers" or not isinstance(loc[3], int):
        return ""
    try:
        ro = data["offers"][loc[1]]
        return f" ({ro['instance_type'][loc[3]]} {ro['market'][loc[3]]})"
    except (KeyError, IndexError, TypeError):
        return ""


def save_atomic(model: BaseModel, path: str | Path, indent: int | None = None) -> None:
    """Write a pydantic model (a catalog, a launch manifest) as JSON to a temporary file beside the
    target, then rename: a crash never leaves half a file. `indent` is for files people read or
    keep in git (the shipped snapshot, run manifests), where readable diffs matter."""
    write_atomic(path, model.model_dump_json(indent=indent))


def current_umask() -> int:
    """The process's umask (reading it means setting it: put straight back)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: str | Path, text: str) -> None:
    """save_atomic for text already made (a cache entry)."""
    path = check_writable(path, "cannot write")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    except OSError as e:  # read-only folder, full disk
        raise FileError(f"cannot write {path}: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~current_umask())  # mkstemp makes it 0600; the file is an ordinary one
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(e, OSError):
            raise FileError(f"cannot write {path}: {e.strerror or e}") from None
        raise

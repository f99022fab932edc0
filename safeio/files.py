"""Reading and writing whole files: bounded reads with one-line errors, and atomic writes (a
temporary file beside the target, then a rename), so a crash never leaves half a file."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from pydantic import BaseModel

from .errors import FileError
from .text import decode_text, parse_json


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


# POSIX's portable NAME_MAX and Linux's PATH_MAX, in bytes: past them open() fails with ENAMETOOLONG
# after the work is done. The file system's own NAME_MAX is used where its folder can be asked.
NAME_MAX, PATH_MAX = 255, 4096


def check_name(path: str | Path, what: str, error: type[Exception] = FileError) -> Path:
    """A name the user gave for a file, refused in one line before any work: a NUL, a name that is
    not UTF-8 (it arrives as surrogate escapes, which cannot be printed into a page or a JSON
    document), a part longer than the file system's NAME_MAX bytes, the whole past PATH_MAX."""
    text = os.fspath(path)
    if "\x00" in text:
        raise error(f"{what} {text!r}: not a usable file name (it holds a NUL character)")
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:
        shown = text.encode("utf-8", "backslashreplace").decode()
        raise error(f"{what} {shown}: the file name is not UTF-8 text; choose a name in UTF-8") from None
    if len(raw) > PATH_MAX:
        raise error(f"{what} {text[:60]}...: the file name is {len(raw):,} bytes long, past the {PATH_MAX:,} a path may have")
    path = Path(text)
    longest = max(path.parts, key=lambda part: len(part.encode()), default="")
    limit = NAME_MAX
    folder = path.parent
    while not folder.is_dir() and folder != folder.parent:
        folder = folder.parent
    try:
        limit = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        pass
    if len(longest.encode()) > limit:
        raise error(f"{what} {text[:60]}...: a part of the name is {len(longest.encode()):,} bytes long, past the "
                    f"{limit} a file name may have")
    return path


def check_writable(path: str | Path, what: str, error: type[Exception] = FileError) -> Path:
    """Say now, before minutes of work, that `path` cannot be written: its name cannot be
    (check_name), it is a directory, or the nearest existing folder above it is not a writable
    folder. Creates nothing."""
    path = check_name(path, what, error)
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

"""Safe reading and writing of the files a user or the network hands the advisor: every file is
read bounded, decoded by one text rule, parsed with limits (depth, integer length), and every
failure is one line of the caller's own error type; writes are atomic. Which characters a name or a
line of text may carry is said once here too (text.py: one_line, has_controls, strip_controls). It knows nothing of the
advisor, the catalog or the probe (tests/test_layout.py holds it to that): they all build on it."""

from .errors import FileError, FirstError, first_error
from .files import (
    check_name,
    check_writable,
    current_umask,
    read_bytes,
    read_json_file,
    read_text,
    save_atomic,
    write_atomic,
)
from .structured import mapping, read_document, read_document_file
from .text import (
    CONTROLS_REFUSED,
    JSON_MAX_DEPTH,
    JSON_MAX_INT_DIGITS,
    decode_text,
    has_controls,
    one_line,
    parse_json,
    strip_controls,
)

__all__ = [
    "CONTROLS_REFUSED",
    "JSON_MAX_DEPTH",
    "JSON_MAX_INT_DIGITS",
    "FileError",
    "FirstError",
    "check_name",
    "check_writable",
    "current_umask",
    "decode_text",
    "first_error",
    "has_controls",
    "mapping",
    "one_line",
    "parse_json",
    "read_bytes",
    "read_document",
    "read_document_file",
    "read_json_file",
    "read_text",
    "save_atomic",
    "strip_controls",
    "write_atomic",
]

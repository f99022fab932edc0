"""What every command-line option may hold: one home for the types, bounds and one-line messages.

Each helper returns an argparse `type=` callable, so a bad value is refused while the arguments are
parsed ("advisor: error: argument --top: ..."), exit 2, before any work starts. The bounds are
what the option can mean, not what the arithmetic survives: a budget under a cent or a deadline
under a minute answers nothing, and 1e308 setup minutes only overflows the cost arithmetic.
"""

from __future__ import annotations

import argparse
import math
import re

from catalog.models import NAME_PATTERN
from lightning_module.contract.result import MAX_BATCH_SIZE, MAX_IMAGE_SIZE, MAX_NUM_CLASSES
from safeio import CONTROLS_REFUSED, has_controls

from .errors import AdvisorError

# Amounts: samples are whole; the largest jobs ever trained see ~1e13 samples (tokens), so 1e15
# is past anything real and keeps hours x price finite.
MAX_SAMPLES = 1e15
MIN_BUDGET_USD, MAX_BUDGET_USD = 0.01, 1e9  # a cent to a billion dollars
MAX_EPOCHS = 1e6
MINUTES_IN_A_WEEK = 7 * 24 * 60  # checkpoint interval, restart and setup time: a week at most
MAX_DAYS = 1e6  # --max-age: past any catalog's age (a big value means "never warn"); NaN and inf refused
MAX_TEXT = 300  # an id, a workload name, a filter value
DEFAULT_TOP = 10  # candidates a ranking shows: recommend --top, advise(top=), build_plan(top=), advise_llm(top=)

_SUFFIX = {"k": 1e3, "m": 1e6, "g": 1e9, "b": 1e9}
# 1,000 and 1,234,567.5: commas only as thousands separators. "500,00" (a decimal comma) is
# refused, not read as 50,000.
_THOUSANDS = re.compile(r"[+-]?\d{1,3}(,\d{3})+(\.\d*)?")


def parse_amount(text: str, what: str, lo: float = 0.0, hi: float = math.inf, whole: bool = False) -> float:
    """A positive finite number in [lo, hi] (lo itself excluded when it is 0); accepts scientific
    notation (1.2e8), underscores (120_000_000), thousands commas (1,000) and k/M/G suffixes (120M).
    `whole`: it counts things (samples), so 1.5 is refused."""
    s = str(text).strip().replace("_", "")
    if "," in s:
        if not _THOUSANDS.fullmatch(s.rstrip("kKmMgGbB")):
            raise AdvisorError(f"{what} {text!r}: use ',' only between thousands (1,000,000) and '.' for decimals")
        s = s.replace(",", "")
    mult = 1.0
    if s[-1:].lower() in _SUFFIX and not s.lower().endswith("inf"):
        mult, s = _SUFFIX[s[-1].lower()], s[:-1]
    try:
        v = float(s) * mult
    except ValueError:
        raise AdvisorError(f"{what} {text!r} is not a number") from None
    if not math.isfinite(v) or v <= 0:
        raise AdvisorError(f"{what} must be a positive finite number, got {text!r}")
    if whole and v != math.floor(v):
        raise AdvisorError(f"{what} counts whole samples, got {text!r}")
    if v < lo or v > hi:
        raise AdvisorError(f"{what} must be between {lo:g} and {hi:g}, got {text!r}")
    return v


def _argtype(fn, name: str):
    """An argparse type from a function that raises AdvisorError; the name shows in argparse's
    'invalid <name> value' only if the message is empty."""

    def convert(text: str):
        try:
            return fn(text)
        except AdvisorError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    convert.__name__ = name
    return convert


def whole(lo: int, hi: int):
    """An integer in [lo, hi]."""

    def conv(text: str) -> int:
        t = text.strip()
        if not re.fullmatch(r"[+-]?\d{1,30}", t):
            raise AdvisorError(f"{text!r} is not a whole number")
        v = int(t)
        if not lo <= v <= hi:
            raise AdvisorError(f"must be between {lo:,} and {hi:,}, got {v:,}" if v > lo else f"must be at least {lo}, got {v}")
        return v

    return _argtype(conv, "whole number")


def number(lo: float, hi: float, lo_open: bool = False):
    """A finite float in [lo, hi] (or (lo, hi] with lo_open)."""

    def conv(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise AdvisorError(f"{text!r} is not a number") from None
        if not math.isfinite(v):
            raise AdvisorError(f"must be a finite number, got {text!r}")
        if v < lo or (lo_open and v == lo) or v > hi:
            low = f"more than {lo:g}" if lo_open else f"at least {lo:g}"
            raise AdvisorError(f"must be {low} and at most {hi:g}, got {text!r}")
        return v

    return _argtype(conv, "number")


def fraction(text: str) -> float:
    """'3%' or '0.03': strictly between 0 and 1."""
    t = text.strip()
    try:
        v = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction or percentage (e.g. 0.03 or 3%)") from None
    if not 0 < v < 1:  # NaN fails too
        raise argparse.ArgumentTypeError(f"must be between 0 and 1 (or 0% and 100%), got {text}")
    return v


def _shown(value: str) -> str:
    """An argument as the bytes that were typed: '\\xff' for a non-UTF-8 byte, '\\x1b' for ESC."""
    try:
        raw = value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate that did not come from a byte
        raw = value.encode("utf-8", "backslashreplace")
    return repr(raw)[1:][:80]


def check_text(value: str, what: str = "", max_len: int = MAX_TEXT) -> str:
    """Text that can be looked up, stored and printed: not empty, valid UTF-8 (a non-UTF-8
    argument arrives as lone surrogates, which SQLite cannot take), no control characters."""
    label = f"{what} " if what else ""
    if not value.strip():
        raise AdvisorError(f"{label}is empty")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise AdvisorError(f"{label}{_shown(value)} is not valid UTF-8 text") from None
    if has_controls(value):  # a tab too: a name is looked up and stored as typed (safeio/text.py)
        raise AdvisorError(f"{label}{_shown(value)} {CONTROLS_REFUSED}")
    if len(value) > max_len:
        raise AdvisorError(f"{label}is {len(value):,} characters long; at most {max_len}")
    return value


text = _argtype(check_text, "text")


def instance_type(value: str) -> str:
    """An EC2 instance type name as the catalog and the results store spell them (g6e.xlarge)."""
    if not re.fullmatch(NAME_PATTERN, value):
        raise argparse.ArgumentTypeError(f"{ascii(value)[:80]} is not an instance type name (e.g. g6e.xlarge)")
    return value


def path(value: str) -> str:
    """A file name: not empty (an empty --catalog or --store was silently the default before)."""
    if not value.strip():
        raise argparse.ArgumentTypeError("is empty: give a file name")
    return value


# The bounds of the probe's workload options live with WorkloadSpec (one home); these are the
# argparse types for them.
image_size = whole(1, MAX_IMAGE_SIZE)
num_classes = whole(2, MAX_NUM_CLASSES)
batch_size = whole(1, MAX_BATCH_SIZE)
minutes = number(0, MINUTES_IN_A_WEEK)
positive_minutes = number(0, MINUTES_IN_A_WEEK, lo_open=True)


def parse_days(text: str, what: str) -> float:
    """A number of days, 0 or more, finite (--max-age, $INSTANCE_ADVISOR_MAX_AGE)."""
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and 0 <= v <= MAX_DAYS):
        raise AdvisorError(f"{what} must be a number of days, 0 or more (e.g. 30), got {text!r}".lstrip())
    return v


days = _argtype(lambda text: parse_days(text, ""), "days")

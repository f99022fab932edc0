"""The Spot Instance Advisor's data: interruption buckets and savings per region and type.

AWS publishes the file behind the Spot Instance Advisor web page
(https://aws.amazon.com/ec2/spot/instance-advisor/) at SPOT_ADVISOR_URL, without credentials.
It is undocumented and may change, so what comes back is validated; a fetch that fails, times
out or is truncated keeps the buckets of the catalog being replaced, with a warning, rather than
failing the whole refresh or dropping the buckets.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from safeio import parse_json, read_bytes

from ..io import CatalogError
from ..models import SAVINGS_PCT_MAX, SAVINGS_PCT_MIN

SPOT_ADVISOR_URL = "https://spot-bid-advisor.s3.amazonaws.com/spot-advisor-data.json"
URL_ENV = "INSTANCE_ADVISOR_SPOT_ADVISOR_URL"  # a mirror, or a local server in tests
# The file is about 1 MB; anything far larger is not it. The whole download gets FETCH_SECONDS,
# each socket operation SOCKET_TIMEOUT_S (urllib's timeout is per operation, not per download).
MAX_BYTES = 32 * 1024 * 1024
FETCH_SECONDS = 60
SOCKET_TIMEOUT_S = 15
# Fewer Linux entries than this over all regions is no complete copy (the 2025-06 file has 33
# regions and about 900 types each); a cut-off file that still parses must not pass.
MIN_ENTRIES = 100

# {region: {instance type: {"r": bucket 0-4, "s": savings % or None}}}
Buckets = dict[str, dict[str, dict[str, int | float | None]]]


def url() -> str:
    return os.environ.get(URL_ENV) or SPOT_ADVISOR_URL


def parse(text: bytes | str, where: str) -> Buckets:
    """The Spot Instance Advisor JSON -> Linux buckets per region; CatalogError (one line) for
    anything that is not that file. Checked whole before anything uses it: a region that is not
    {"Linux": {type: {"r": 0-4, "s": savings %}}}, or one entry out of shape, refuses the file
    (AWS's own file has 25,000 entries and none out of shape), and so does a file with no entries."""
    doc = parse_json(text, where, CatalogError)  # the one JSON reader: nesting, huge integers
    advisor = doc.get("spot_advisor") if isinstance(doc, dict) else None
    if not isinstance(advisor, dict):
        raise CatalogError(f"{where} has no 'spot_advisor' object (expected the Spot Instance Advisor JSON)")
    out: Buckets = {}
    for region, by_os in advisor.items():
        if not isinstance(by_os, dict):
            raise CatalogError(f"{where}: region {region!r} is not an object of operating systems")
        linux = by_os.get("Linux", {})
        if not isinstance(linux, dict):
            raise CatalogError(f"{where}: region {region!r}: its Linux entry is not an object of instance types")
        clean: dict[str, dict[str, int | float | None]] = {}
        for itype, v in linux.items():
            r, s = (v.get("r"), v.get("s")) if isinstance(v, dict) else (None, None)
            if not (isinstance(r, int) and not isinstance(r, bool) and 0 <= r <= 4):
                raise CatalogError(f"{where}: {region!r} {itype!r}: interruption bucket 'r' "
                                   f"is {r!r}, not 0-4 (the file's five ranges)")
            # the catalog's own bound: the 2025-06 file has p5.48xlarge in ca-central-1 at -62
            ok = isinstance(s, (int, float)) and not isinstance(s, bool) and SAVINGS_PCT_MIN <= s <= SAVINGS_PCT_MAX
            clean[itype] = {"r": r, "s": s if ok else None}
        out[region] = clean
    if not any(out.values()):
        raise CatalogError(f"{where} has no Linux interruption buckets")
    return out


def load(path: str | Path) -> Buckets:
    """A saved copy (--spot-advisor FILE)."""
    path = Path(path)
    return parse(read_bytes(path, "spot advisor file", MAX_BYTES, CatalogError), f"spot advisor file {path}")


def fetch(source: str | None = None) -> Buckets:
    """Download and validate the public file; CatalogError (one line) when it cannot be had."""
    import http.client
    import urllib.error
    import urllib.request

    source = source or url()
    where = f"the Spot Instance Advisor data at {source}"
    if not source.startswith(("https://", "http://")):
        raise CatalogError(f"{where}: not an http(s) URL")
    deadline = time.monotonic() + FETCH_SECONDS
    try:
        with urllib.request.urlopen(source, timeout=SOCKET_TIMEOUT_S) as resp:
            expected = resp.headers.get("Content-Length")
            chunks, size = [], 0
            while chunk := resp.read(64 * 1024):
                chunks.append(chunk)
                size += len(chunk)
                if size > MAX_BYTES:
                    raise CatalogError(f"{where} is larger than {MAX_BYTES >> 20} MiB")
                if time.monotonic() > deadline:
                    raise CatalogError(f"{where} took longer than {FETCH_SECONDS} s to download")
    except urllib.error.HTTPError as e:
        raise CatalogError(f"{where}: HTTP {e.code} {e.reason}") from None
    except urllib.error.URLError as e:
        raise CatalogError(f"{where}: {' '.join(str(e.reason).split())}") from None
    except (TimeoutError, OSError, http.client.HTTPException) as e:  # timeouts, resets, a cut-off body
        raise CatalogError(f"{where}: {type(e).__name__}: {' '.join(str(e).split()) or 'no answer'}") from None
    except ValueError as e:  # a malformed URL in the environment variable
        raise CatalogError(f"{where}: {e}") from None
    body = b"".join(chunks)
    if expected is not None and expected.isdigit() and int(expected) != len(body):
        raise CatalogError(f"{where} was cut off ({len(body)} of {expected} bytes)")
    buckets = parse(body, where)
    entries = sum(len(v) for v in buckets.values())
    if entries < MIN_ENTRIES:
        raise CatalogError(f"{where} has {entries} Linux entries, fewer than a complete copy ({MIN_ENTRIES}+)")
    return buckets


def from_catalog(catalog) -> Buckets:
    """The buckets a catalog already carries (its spot offers), to keep when a fetch fails."""
    out: Buckets = {}
    if catalog is None:
        return out
    for region in catalog.regions:
        for o in catalog.iter_offers(region):
            if o.market == "spot" and o.interruption_bucket is not None:
                out.setdefault(region, {})[o.instance_type] = {"r": o.interruption_bucket, "s": o.savings_pct}
    return out

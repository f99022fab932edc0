"""Time the advisor's answers to hostile inputs (issue 11): each must be one line, and fast, however
big the input. Before the fix `catalog info` was quadratic in the provenance's length (58 s at
16 MB; still running after 600 s at 200 MB). Then (issue 21) count, by class, what becomes of
values that parse but cannot be true, and of text that is not UTF-8: refused in one line (exit 2),
stored and usable by every read command and recommend, or a failure (exit 70, a traceback, any
other status). `--cases N` hostile records per class (default 60).

Each case runs the CLI in-process and prints the wall time, the exit status and the output size:
    catalog info  on a catalog whose provenance is 1 MiB (the largest accepted), 16 MB and 200 MB
    results import of a result nested 200,000 levels deep / with a 60,000-digit integer
    safe_text on a 50 MB single-line log
    the classes of issue 21 (hostile_classes.py): counts of each outcome per class
    the classes of issue 34 (hostile_issue34.py): configs, price files, shapes in results, output
      names, signal sequences sent to a real process

    .venv/bin/python benchmarks/hostile_inputs.py [--scale 1.0] [--cases 60]   # --scale 0.01 --cases 5: quick
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from hostile_classes import count_by_class
from hostile_issue34 import count_issue34

from advisor.cli import main as advisor
from advisor.output import safe_text
from catalog.io import SNAPSHOT_PATH


def cpu() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or "unknown CPU"
    model = next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")), "?")
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return f"{model}; {'AVX512_BF16' if 'avx512_bf16' in flags else 'no AVX512_BF16'}"


def run(*argv: str) -> tuple[float, int, int, int]:
    out, err = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = advisor(list(argv))
    return time.perf_counter() - t0, code, len(out.getvalue()), err.getvalue().count("\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the input sizes (0.01 for a quick check)")
    ap.add_argument("--cases", type=int, default=60, help="hostile records per class of issue 21")
    args = ap.parse_args()
    print(f"machine: {cpu()}; python {platform.python_version()}")
    snapshot = json.loads(SNAPSHOT_PATH.read_text())
    with tempfile.TemporaryDirectory() as d:
        for label, n in (("1 MiB", 2**20), ("16 MB", 16_000_000), ("200 MB", 200_000_000)):
            n = max(1, int(n * (args.scale if n > 2**20 else 1)))
            doc = dict(snapshot, provenance=("provenance " * (n // 11 + 1))[:n])
            f = Path(d) / "c.json"
            f.write_text(json.dumps(doc))
            secs, code, out, errs = run("catalog", "info", "--catalog", str(f), "--max-age", "100000")
            print(f"catalog info, provenance {label} ({n:,} chars): {secs:.2f} s, exit {code}, "
                  f"{out:,} chars printed, {errs} stderr line(s)")
        depth, digits = int(200_000 * args.scale) or 100, int(60_000 * args.scale) or 5000
        for label, text in ((f"{depth:,} levels deep", "[" * depth + "]" * depth),
                            (f"a {digits:,}-digit integer", '{"samples_per_sec": ' + "9" * digits + "}")):
            f = Path(d) / "r.json"
            f.write_text(text)
            secs, code, out, errs = run("results", "import", str(f), "--store", str(Path(d) / "s.db"))
            print(f"results import, {label}: {secs:.3f} s, exit {code}, {errs} stderr line(s)")
        size = int(50_000_000 * args.scale)
        log = "\x1b[2J" + "A" * size
        t0 = time.perf_counter()
        shown = safe_text(log, 500)
        print(f"safe_text on a {size:,}-character line: {time.perf_counter() - t0:.4f} s, {len(shown)} chars shown")
    failures = count_by_class(args.cases) + count_issue34(args.cases)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())

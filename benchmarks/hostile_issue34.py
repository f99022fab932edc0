"""Issue 34's classes of hostile input, counted by outcome (run from hostile_inputs.py): the inputs
added after issue 21. Configs (`recommend --config`), price files (`recommend --prices`, each also
asked for an HTML page, whose axes take the price's log), model shapes and constructor arguments
inside a probe result (`results import`, then `recommend` of that workload), the names of output
files (`--plot`, `--format html FILE`, `--prices`), and signal sequences sent to a real `advisor`
process (two SIGTERMs 0.3 s apart, SIGTERM then SIGINT, SIGINT then SIGTERM, at several moments
counted from the advisor's first line, seen as its SIGTERM handler in /proc/PID/status).

Outcomes as issue 21's table: "refused" (exit 2 and one error line; for a signal: exit 130/143 by
the first signal, one line, no file left behind), "usable" (exit 0: the input was read as meant, or
the command had finished before the signal), "failure" (anything else: a traceback, exit 70, death
by the signal, a hang past 120 s, a file left half-written).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from hostile_classes import NUMBER_CLASSES, Bench, _base_result, _cli, _raw

ROOT = Path(__file__).resolve().parent.parent
RECOMMEND = ("recommend", "--budget", "500", "--deadline", "2d", "--samples", "1e8", "--max-age", "100000")
BOOLEANS = ["true", "false", "yes", "no", "on", "off"]


def _nest(kind: str, depth: int) -> str:
    if kind == "flow":
        return "[" * depth + "]" * depth
    if kind == "flow map":
        return "{a: " * depth + "1" + "}" * depth
    return "\n" + "".join(" " * (i + 1) + f"k{i}:\n" for i in range(depth))  # block


def _bomb(levels: int, width: int) -> str:
    lines = ["a0: &a0 [" + ", ".join(["x"] * width) + "]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def _outcome(code: int, err: str) -> str:
    if code not in (0, 2) or "Traceback" in err:
        return "failure"
    if code == 2:
        return "refused" if len([ln for ln in err.splitlines() if ln.strip()]) == 1 else "failure"
    return "usable"


class Cases:
    def __init__(self, d: Path, rnd: random.Random):
        self.d, self.rnd, self.bench = d, rnd, Bench(d)

    def _file(self, text: str | bytes, suffix: str) -> str:
        f = self.d / f"{self.rnd.getrandbits(64):016x}{suffix}"
        f.write_bytes(text if isinstance(text, bytes) else text.encode())
        return str(f)

    def config(self, text: str) -> str:
        return _outcome(*_cli(*RECOMMEND, "--config", self._file(text, ".yaml"))[::2])

    def prices(self, text: str, suffix: str = ".yaml") -> str:
        page = self.d / "page.html"
        code, _, err = _cli(*RECOMMEND, "--prices", self._file(text, suffix), "--format", "html", str(page))
        done = _outcome(code, err)
        if done == "refused" and page.exists():
            done = "failure"  # refused, yet something written
        page.unlink(missing_ok=True)
        return done

    def output_name(self, argv: tuple[str, ...]) -> str:
        before = set(self.d.iterdir())
        code, _, err = _cli(*RECOMMEND, *argv)
        done = _outcome(code, err)
        if done == "refused" and set(self.d.iterdir()) - before:
            done = "failure"
        return done


def config_cases(rnd: random.Random, n: int) -> list[str]:
    wrong = ["'d_model=4'", "[1, 2]", "3", "true", "null-ish", "[{a: 1}]", "1.5e3"]
    out = []
    for _ in range(n):
        kind = rnd.choice(["args", "nest", "bomb", "digits", "keys"])
        if kind == "args":
            sec = rnd.choice([("model", "a.B", "init_args"), ("data", "a.D", "init_args"), ("model", "a.B", "dict_kwargs"),
                              ("optimizer", "AdamW", "init_args")])
            head = "model: a.B\n" if sec[0] == "optimizer" else ""
            out.append(f"{head}{sec[0]}:\n  class_path: {sec[1]}\n  {sec[2]}: {rnd.choice(wrong)}\n")
        elif kind == "nest":
            out.append("model: " + _nest(rnd.choice(["flow", "flow map", "block"]), rnd.choice([100, 1000, 100_000])) + "\n")
        elif kind == "bomb":
            out.append(_bomb(rnd.randint(3, 9), rnd.randint(3, 9)) + "model: {class_path: a.B, init_args: {x: *a2}}\n")
        elif kind == "digits":
            out.append("model: {class_path: a.B, init_args: {x: " + "9" * rnd.choice([5000, 100_000]) + "}}\n")
        else:
            out.append("model: {class_path: a.B, init_args: {1: x, [a]: y}}\n")
    return out


def price_cases(rnd: random.Random, n: int) -> list[tuple[str, str]]:
    rows = [("discounts", "percent", "market: on-demand"), ("overrides", "usd_per_hour", "instance_type: g5.2xlarge"),
            ("reserved", "count", "instance_type: g5.2xlarge")]
    values = BOOLEANS + ["5.0e-324", "1.0e-320", "0.0009", "-1", ".nan", ".inf", "1.0e400", "'5'"]
    out = []
    for _ in range(n):
        kind = rnd.choice(["value", "value", "json bool", "nest", "bomb"])
        sec, key, rest = rnd.choice(rows)
        if kind == "value":
            out.append((f"{sec}:\n  - {{{rest}, {key}: {rnd.choice(values)}}}\n", ".yaml"))
        elif kind == "json bool":
            k, v = rest.split(": ")
            out.append((json.dumps({sec: [{k: v, key: rnd.choice([True, False])}]}), ".json"))
        elif kind == "nest":
            out.append((f"{sec}: " + _nest(rnd.choice(["flow", "flow map", "block"]), rnd.choice([1000, 100_000])) + "\n",
                        ".yaml"))
        else:
            out.append((_bomb(rnd.randint(3, 9), rnd.randint(3, 9)) + f"{sec}: *a2\n", ".yaml"))
    return out


def shape_cases(rnd: random.Random, n: int) -> list[str]:
    base = _base_result()
    every = [v for vs in NUMBER_CLASSES.values() for v in vs] + [1e-320, 1e-306, 2.0**-31]
    out = []
    for _ in range(n):
        fit = {"where": "accelerator", "points": [{"batch_size": 8, "peak_gib": 2.0}], "fixed_gib": 1.0,
               "per_sample_gib": 0.1}
        doc = {**base, "shape": {"data_source": "module", "memory": fit}}
        kind = rnd.choice(["per_sample", "fixed", "init_args"])
        if kind == "init_args":
            path, value = ("workload", rnd.choice(["init_args", "data_init_args"])), rnd.choice(["x", [1], 3, True])
        else:
            path = ("shape", "memory", "per_sample_gib" if kind == "per_sample" else "fixed_gib")
            value = rnd.choice(every)
        out.append(_raw(doc, path, value))
    return out


def name_cases(d: Path) -> list[tuple[str, ...]]:
    bad = ["a" * 300, os.fsdecode(b"caf\xe9"), os.fsdecode(b"\xff\xfe"), "d/" * 2100 + "x", "a\udcff", "x\x00y"]
    out = []
    for b in bad:
        out += [("--plot", str(d / f"{b}.svg")), ("--format", "html", str(d / f"{b}.html")),
                ("--prices", str(d / f"{b}.yaml"))]
    return out


def _wait_for_handler(pid: int, limit_s: float = 60.0) -> None:
    """Until the process catches SIGTERM (its SigCgt mask in /proc): the advisor's first line has
    run. Before it only the interpreter's own start runs (docs/exit-codes.md), which no handler of
    ours can cover; the delays count from here. Off Linux, no wait."""
    status = Path(f"/proc/{pid}/status")
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        try:
            caught = next(int(ln.split()[1], 16) for ln in status.read_text().splitlines() if ln.startswith("SigCgt:"))
        except (OSError, StopIteration):
            return
        if caught >> (signal.SIGTERM - 1) & 1:
            return
        time.sleep(0.01)


def signal_outcome(seq: tuple[int, int], delay: float, d: Path) -> str:
    """A real `advisor` process: the first signal `delay` s after start, the second 0.3 s later."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "INSTANCE_ADVISOR_DATA_DIR": str(d / "data")}
    page = d / f"sig-{time.monotonic_ns()}.html"
    p = subprocess.Popen([sys.executable, "-m", "advisor", *RECOMMEND, "--format", "html", str(page)], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _wait_for_handler(p.pid)
    time.sleep(delay)
    for i, sig in enumerate(seq):
        if i:
            time.sleep(0.3)
        if p.poll() is None:
            p.send_signal(sig)
    try:
        _, err = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        return "failure"
    leftovers = [f for f in d.iterdir() if f.name.startswith(page.name)]
    if p.returncode == 0:
        return "usable" if page.exists() else "failure"
    stopped = p.returncode == 128 + seq[0] and len([ln for ln in err.splitlines() if ln.strip()]) == 1
    return "refused" if stopped and not leftovers else "failure"


def count_issue34(cases: int, seed: int = 34) -> int:
    """Print the table of issue 34's classes; return the number of failures."""
    rnd = random.Random(seed)
    with tempfile.TemporaryDirectory() as d:
        c = Cases(Path(d), rnd)
        classes: dict[str, list] = {
            "config: wrong-typed sections, nesting, aliases, digits": [
                (c.config, t) for t in config_cases(rnd, cases)],
            "price file: booleans, floors, nesting, aliases": [
                (lambda a: c.prices(*a), t) for t in price_cases(rnd, cases)],
            "result shape: memory fit, init args": [(c.bench.result, t) for t in shape_cases(rnd, cases)],
            "output names: length, encoding, NUL": [(c.output_name, a) for a in name_cases(Path(d))],
        }
        seqs = [(signal.SIGTERM, signal.SIGTERM), (signal.SIGTERM, signal.SIGINT), (signal.SIGINT, signal.SIGTERM)]
        delays = [0.0, 0.4, 1.0][: max(1, min(3, cases // 10))]
        classes["signal sequences (a real process, from its first line)"] = [
            (lambda a: signal_outcome(*a, Path(d)), (s, t)) for s in seqs for t in delays]
        print(f"\n{'class (issue 34)':58} {'inputs':>6} {'refused':>8} {'usable':>7} {'failure':>8}")
        total: Counter = Counter()
        for name, fns in classes.items():
            got = Counter(read(data) for read, data in fns)
            total.update(got)
            print(f"{name:58} {len(fns):6} {got['refused']:8} {got['usable']:7} {got['failure']:8}")
        print(f"{'all':58} {sum(total.values()):6} {total['refused']:8} {total['usable']:7} {total['failure']:8}")
    return total["failure"]


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(1 if count_issue34(int(sys.argv[1]) if len(sys.argv) > 1 else 30) else 0)

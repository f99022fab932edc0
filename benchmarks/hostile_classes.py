"""Issue 21's classes of hostile input, counted by outcome (run from hostile_inputs.py).

Each class puts values that parse but cannot be true (or text that is not UTF-8) into the records
the advisor reads: a probe result (`results import`), a training run's result (the same, with
`source: training run` and no ladder), a run manifest (read back as `launch status` and `results
pull` read it), a team's reference file (`references list`),
a catalog file (`catalog info`) and a Spot Instance Advisor file (`catalog refresh --spot-advisor`,
refused before any AWS call). A stored result must then be usable by `results list/show/export` and
`recommend`. Outcomes: "refused" (exit 2, one error line), "usable" (stored, every read command and
recommend exit 0 or 2, no NaN, inf% or utilisation above 100% shown), "failure" (exit 70, a traceback, anything else).
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import re
import sys
import tempfile
import uuid
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

sys.path.insert(0, str(ROOT / "tests"))  # the tests' JSON-path helpers, one home
from json_paths import get_path, leaves, set_path

from advisor.cli import main as advisor
from advisor.estimate.references import REFERENCE_PATH
from catalog.io import SNAPSHOT_PATH


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = advisor(list(argv))
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def _base_result() -> dict:
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    from factories import probe_result

    doc = json.loads(probe_result(n=0, flops_per_sample=8.2e9).model_dump_json())
    doc.update(achieved_tflops=0.328, peak_tflops_matmul=2.0, utilisation_matmul=0.164,
               pipeline_samples_per_sec_per_worker=900.0)
    return doc


NUMBER_CLASSES = {
    "numbers: non-finite (NaN, Infinity, 1e400)": ["NaN", "Infinity", "-Infinity", "1e400"],
    "numbers: denormal or below a floor": [5e-324, 2.2e-308, 1e-300, 1e-7],
    "numbers: past a physical bound": [1e13, 1e300, 1.7976931348623157e308, 10**30],
    "numbers: negative": [-1.0, -5e-324, -(10**9), -1e308],
    "numbers: JSON booleans": [True, False],
    "numbers: strings": ["40", "1e3", "", "0x10"],
}
TEXT_VALUES = ["", "\x1b[2J", "a\nb", "\u202e", "x" * 100_000, "../../etc", "\x7f\x9b", 5, True, None]
ENCODINGS = {
    "UTF-16": lambda t: t.encode("utf-16"), "UTF-16-LE": lambda t: t.encode("utf-16-le"),
    "UTF-32": lambda t: t.encode("utf-32"), "UTF-32-BE": lambda t: t.encode("utf-32-be"),
    "invalid UTF-8": lambda t: t.encode().replace(b'"', b'"\xff', 1),
    "Latin-1": lambda t: t.replace("{", '{"x": "caf\u00e9", ', 1).encode("latin-1", errors="replace"),
}


class Bench:
    def __init__(self, d: Path):
        self.d = d
        self.catalog = str(SNAPSHOT_PATH)

    def _file(self, data: str | bytes) -> str:
        f = self.d / f"{uuid.uuid4().hex}.json"
        f.write_bytes(data.encode() if isinstance(data, str) else data)
        return str(f)

    @staticmethod
    def _bad(code: int, err: str) -> bool:
        return code not in (0, 2) or "Traceback" in err

    def _refused(self, code: int, err: str) -> str | None:
        if self._bad(code, err):
            return "failure"
        if code == 2:
            errors = [ln for ln in err.splitlines() if ln.startswith("advisor: error: ")]
            return "refused" if len(errors) == 1 else "failure"
        return None

    def result(self, data: str | bytes) -> str:
        store = str(self.d / f"{uuid.uuid4().hex}.db")
        code, _, err = _cli("results", "import", self._file(data), "--store", store)
        if (done := self._refused(code, err)) is not None:
            return done
        code, out, err = _cli("results", "export", "--store", store)
        if self._bad(code, err):
            return "failure"
        exported = json.loads(out)  # {"schema": "results-export", ..., "results": [...]} (a bare list before)
        for r in exported["results"] if isinstance(exported, dict) else exported:
            for fmt in ("table", "json"):
                code, shown, err = _cli("results", "show", r["result_id"], "--store", store, "--format", fmt)
                if code != 0 or "inf%" in shown or "nan%" in shown.lower() or any(
                        float(u.replace(",", "")) > 100 for u in re.findall(r"utilisation ([\d,.]+)%", shown)):
                    return "failure"
        for argv in (("results", "list", "--store", store),
                     ("recommend", "--budget", "500", "--deadline", "2d", "--samples", "1e8", "--catalog",
                      self.catalog, "--store", store, "--max-age", "100000", "--format", "json")):
            code, _, err = _cli(*argv)
            if self._bad(code, err):
                return "failure"
        return "usable"

    def reference(self, data: str | bytes) -> str:
        ref = self._file(data)
        code, _, err = _cli("references", "list", "--references", ref, "--format", "json")
        if (done := self._refused(code, err)) is not None:
            return done
        code, _, err = _cli("recommend", "--budget", "500", "--deadline", "2d", "--samples", "1e8", "--catalog",
                            self.catalog, "--references", ref, "--format", "json", "--max-age", "100000")
        return "failure" if self._bad(code, err) else "usable"

    def catalog_file(self, data: bytes) -> str:
        code, _, err = _cli("catalog", "info", "--catalog", self._file(data), "--max-age", "100000")
        return self._refused(code, err) or "usable"

    def spot_advisor_file(self, data: bytes) -> str:
        code, _, err = _cli("catalog", "refresh", "--spot-advisor", self._file(data), "--regions", "us-east-1")
        return self._refused(code, err) or "failure"  # exit 0 would mean it reached AWS: not here


class Manifests:
    """A run manifest read back from the data dir (`launch status`, `results pull` read it so)."""

    def __init__(self, d: Path):
        import os

        os.environ["INSTANCE_ADVISOR_DATA_DIR"] = str(d / "data")
        from advisor.ec2 import manifest

        self.m = manifest
        self.dir = manifest.runs_dir()
        self.dir.mkdir(parents=True, exist_ok=True)

    def base(self) -> dict:
        e = self.m.LaunchEntry(instance_type="g5.xlarge", arch="x86_64", ami="ami-0abc", market="spot",
                               usd_per_hour=0.5, root_device="/dev/sda1", root_volume_gib=100,
                               kept_volumes={"/dev/sdb": 50}, result_key="p/r/g5.xlarge/result.json",
                               log_key="p/r/g5.xlarge/probe.log", state="launched", instance_id="i-0abc")
        run = self.m.RunManifest(run_id="20261126-120000-abcdef", region="us-east-1", bucket="my-bucket",
                                 prefix="p/20261126-120000-abcdef", workload="resnet50", max_minutes=45,
                                 package="p/x.whl", entries=[e])
        return json.loads(run.model_dump_json())

    def read(self, data: str | bytes) -> str:
        from advisor.errors import AdvisorError

        (self.dir / "20261126-120000-abcdef.json").write_bytes(data.encode() if isinstance(data, str) else data)
        try:
            self.m.load("20261126-120000-abcdef").model_dump_json()
        except AdvisorError as e:
            return "refused" if "\n" not in str(e) else "failure"
        except Exception:  # noqa: BLE001 - a traceback's worth: what this counts
            return "failure"
        return "usable"


MANIFEST_NUMBERS = [("max_minutes",), ("manifest_version",), ("entries", 0, "usd_per_hour"),
                    ("entries", 0, "root_volume_gib"), ("entries", 0, "kept_volumes", "/dev/sdb")]
MANIFEST_TEXT = [("run_id",), ("region",), ("bucket",), ("prefix",), ("workload",), ("package",),
                 ("entries", 0, "instance_type"), ("entries", 0, "ami"), ("entries", 0, "instance_id"),
                 ("entries", 0, "result_key"), ("entries", 0, "launched_at"), ("created_at",)]


def _raw(doc: dict, path: tuple, value) -> str:
    """JSON text with `value` at `path`; a str value in NUMBER_CLASSES' non-finite class is a bare token."""
    if isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity", "1e400"):
        return json.dumps(set_path(doc, path, "__TOKEN__")).replace('"__TOKEN__"', value)
    return json.dumps(set_path(doc, path, value))


def count_by_class(cases: int, seed: int = 21) -> int:
    """Print a table of outcomes per class; return the number of failures."""
    rnd = random.Random(seed)
    base = _base_result()
    from json_paths import numeric_paths

    from lightning_module.contract.result import ProbeResult

    numeric = numeric_paths(base, ProbeResult)
    text = [p for p in leaves(base) if isinstance(get_path(base, p), str)]
    refs = json.loads(REFERENCE_PATH.read_text())
    row = refs["measurements"][0]
    ref_numeric = [(k,) for k, v in row.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    snapshot = SNAPSHOT_PATH.read_text()
    advisor_good = json.dumps({"spot_advisor": {"us-east-1": {"Linux": {"c7i.large": {"r": 1, "s": 60}}}}})
    with tempfile.TemporaryDirectory() as d:
        b = Bench(Path(d))
        # class -> [(reader, the input's bytes or text)]
        classes: dict[str, list] = {}
        for name, values in NUMBER_CLASSES.items():
            classes[f"result {name}"] = [
                (b.result, _raw(base, rnd.choice(numeric), rnd.choice(values))) for _ in range(cases)]
            classes[f"reference row {name}"] = [
                (b.reference, _raw(refs, ("measurements", 0, *rnd.choice(ref_numeric)), rnd.choice(values)))
                for _ in range(max(1, cases // 4))]
        los = [rnd.uniform(41, 1e6) for _ in range(cases)]
        classes["result: a CI without its estimate"] = [
            (b.result, json.dumps({**base, "samples_per_sec_ci": [lo, lo * 2]})) for lo in los]
        utils = [(rnd.choice([1.01, 2.0, 1e3, 1e308]), rnd.choice(["matmul", "datasheet"])) for _ in range(cases)]
        classes["result: utilisation above 100% (stored, emptied)"] = [
            (b.result, json.dumps({**base, f"peak_tflops_{w}": 0.3, f"utilisation_{w}": u})) for u, w in utils]
        classes["result: hostile text"] = [
            (b.result, _raw(base, rnd.choice(text), rnd.choice(TEXT_VALUES))) for _ in range(cases)]
        result_text, ref_text = json.dumps(base), json.dumps(refs)
        classes["encodings (result, reference, catalog, spot advisor)"] = [
            case for enc in ENCODINGS.values() for case in (
                (b.result, enc(result_text)), (b.reference, enc(ref_text)), (b.catalog_file, enc(snapshot)),
                (b.spot_advisor_file, enc(advisor_good)))]
        bad_advisors = [{"spot_advisor": ["us-east-1"]}, {"spot_advisor": {"us-east-1": 3}},
                        {"spot_advisor": {"us-east-1": {"Linux": []}}}, {"spot_advisor": {}},
                        *({"spot_advisor": {"us-east-1": {"Linux": {"c7i.large": {"r": r, "s": 60}}}}}
                          for r in (9, -1, 5, True, "1", None, 1.5))]
        classes["spot advisor file: wrong shape or bucket"] = [
            (b.spot_advisor_file, json.dumps(v).encode()) for v in bad_advisors]
        # issue 21's later inputs: a training run's record and the run manifests (after the others, so
        # the earlier classes draw the same inputs as before)
        run_numeric = [q for q in numeric if q[0] != "ladder"]
        run = {**base, "source": "training run", "ladder": [], "stop_reason": "training ended"}
        classes["training-run record: any hostile number"] = [
            (b.result, _raw(run, rnd.choice(run_numeric), rnd.choice([v for vs in NUMBER_CLASSES.values() for v in vs])))
            for _ in range(cases)]
        classes["training-run record: hostile source"] = [
            (b.result, _raw(run, ("source",), v)) for v in ("training", "Probe", "", 1, True, None, "training run\n")]
        mf = Manifests(Path(d))
        mbase = mf.base()
        every_number = [v for vs in NUMBER_CLASSES.values() for v in vs]
        classes["run manifest: hostile numbers"] = [
            (mf.read, _raw(mbase, rnd.choice(MANIFEST_NUMBERS), rnd.choice(every_number))) for _ in range(cases)]
        classes["run manifest: hostile text"] = [
            (mf.read, _raw(mbase, rnd.choice(MANIFEST_TEXT), rnd.choice(TEXT_VALUES))) for _ in range(cases)]
        print(f"\n{'class (issue 21)':58} {'inputs':>6} {'refused':>8} {'usable':>7} {'failure':>8}")
        total: Counter = Counter()
        for name, fns in classes.items():
            c = Counter(read(data) for read, data in fns)
            total.update(c)
            print(f"{name:58} {len(fns):6} {c['refused']:8} {c['usable']:7} {c['failure']:8}")
        print(f"{'all':58} {sum(total.values()):6} {total['refused']:8} {total['usable']:7} {total['failure']:8}")
    return total["failure"]

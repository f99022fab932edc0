"""Run a fixed set of commands (every `recommend --format`, --plot svg, the probe result's text
through `results show`, errors, a cold and a warm model cache) and write what each printed and
wrote under OUTDIR, so two trees' outputs can be compared with `diff -r`.

    python scripts/capture_outputs.py OUTDIR

Run it from the root of the tree to capture (it runs `python -m advisor` with that tree first on the
path). Everything the commands read or write lives in a fresh temporary folder (catalog cache,
model cache, results store), so a run depends on the tree alone. What would differ between two
runs of the same tree is fixed or masked: the page's minute stamp (masked), matplotlib's SVG date
and ids (SOURCE_DATE_EPOCH, svg.hashsalt) and the temporary folder's name (replaced by TMP).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JOB = ["--budget", "500", "--deadline", "2d", "--samples", "1e8"]
TIGHT = ["--budget", "1", "--deadline", "1h", "--samples", "1e8"]
MLP = ["--workload", "mlp"]  # the workload docs/examples/mlp-cpu.json measured

# name -> argv after `advisor`; {tmp} is the temporary folder. Order matters: the first recommend
# runs on a cold model cache, "warm-table" repeats it on the cache the first one wrote.
COMMANDS: list[tuple[str, list[str]]] = [
    ("help", ["recommend", "--help"]),
    ("cold-table", ["recommend", *JOB]),
    ("warm-table", ["recommend", *JOB]),
    ("markdown", ["recommend", *JOB, "--format", "markdown"]),
    ("csv", ["recommend", *JOB, "--format", "csv"]),
    ("json", ["recommend", *JOB, "--format", "json"]),
    ("skypilot", ["recommend", *JOB, "--format", "skypilot"]),
    ("html", ["recommend", *JOB, "--format", "html", "{tmp}/out/page.html"]),
    ("plot-svg", ["recommend", *JOB, "--plot", "{tmp}/out/plot.svg"]),
    ("wide-any-pareto", ["recommend", *JOB, "--wide", "--market", "any", "--objective", "pareto", "--show-excluded"]),
    ("fastest-confidence-markdown", ["recommend", *JOB, "--objective", "fastest", "--confidence", "0.9",
                                     "--format", "markdown", "--market", "spot"]),
    ("tight-table", ["recommend", *TIGHT]),
    ("tight-json", ["recommend", *TIGHT, "--format", "json"]),
    ("tight-csv", ["recommend", *TIGHT, "--format", "csv", "--show-excluded"]),
    ("tight-html", ["recommend", *TIGHT, "--format", "html", "{tmp}/out/tight.html"]),
    ("narrow-80", ["recommend", *JOB, "--market", "any"]),  # COLUMNS=80: see run()
    ("import", ["results", "import", str(ROOT / "docs/examples/mlp-cpu.json")]),
    ("results-list", ["results", "list"]),
    ("results-show-table", ["results", "show", "{id}"]),
    ("results-show-markdown", ["results", "show", "{id}", "--format", "markdown"]),
    ("results-show-csv", ["results", "show", "{id}", "--format", "csv"]),
    ("results-show-json", ["results", "show", "{id}", "--format", "json"]),
    ("results-export-csv", ["results", "export", "--format", "csv"]),
    ("measured-table", ["recommend", *MLP, *JOB]),
    ("measured-json", ["recommend", *MLP, *JOB, "--format", "json"]),
    ("measured-skypilot", ["recommend", *MLP, *JOB, "--format", "skypilot"]),
    ("measured-html", ["recommend", *MLP, *JOB, "--format", "html", "{tmp}/out/measured.html"]),
    ("error-html-no-file", ["recommend", *JOB, "--format", "html"]),
    ("error-file-not-html", ["recommend", *JOB, "stray.html"]),
    ("error-plot-ending", ["recommend", *JOB, "--plot", "{tmp}/out/plot.txt"]),
]
STAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC")


def run(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="capture-") as t:
        tmp = Path(t)
        (tmp / "out").mkdir()
        (tmp / "mpl").mkdir()
        (tmp / "mpl" / "matplotlibrc").write_text("svg.hashsalt: capture\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("INSTANCE_ADVISOR", "XDG_", "AWS_"))}
        env |= {"PYTHONPATH": str(ROOT), "INSTANCE_ADVISOR_CACHE_DIR": str(tmp / "cache"),
                "INSTANCE_ADVISOR_DATA_DIR": str(tmp / "data"),
                "SOURCE_DATE_EPOCH": "0", "MPLCONFIGDIR": str(tmp / "mpl"), "COLUMNS": "100", "TZ": "UTC",
                "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull}
        result_id = None
        for name, argv in COMMANDS:
            if "{id}" in argv and result_id is None:
                continue
            argv = [a.replace("{tmp}", t).replace("{id}", result_id or "") for a in argv]
            e = env | ({"COLUMNS": "80"} if name == "narrow-80" else {})
            p = subprocess.run([sys.executable, "-m", "advisor", *argv], env=e, cwd=tmp, capture_output=True,
                               text=True, check=False)
            if name == "import":
                listed = subprocess.run([sys.executable, "-m", "advisor", "results", "list", "--format", "csv"],
                                        env=env, cwd=tmp, capture_output=True, text=True,
                                        check=False).stdout.splitlines()
                result_id = listed[1].split(",")[0][:12] if len(listed) > 1 else None
            for suffix, text in (("stdout", p.stdout), ("stderr", p.stderr), ("rc", f"{p.returncode}\n")):
                (out / f"{name}.{suffix}").write_text(STAMP.sub("STAMP", text.replace(t, "TMP")))
        for f in sorted((tmp / "out").iterdir()):
            body = f.read_bytes()
            if f.suffix in (".html", ".svg"):
                body = STAMP.sub("STAMP", body.decode().replace(t, "TMP")).encode()
            (out / f"file-{f.name}").write_bytes(body)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: capture_outputs.py OUTDIR")
    run(Path(sys.argv[1]))

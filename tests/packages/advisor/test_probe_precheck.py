"""`advisor probe` checks its input before torch is imported: a workload that is not there, a class
the module does not define, arguments its constructor does not take or needs, a bad config: one
line, exit 2, and torch never imported (the answer comes in well under a second, not ~11 s)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from checkout import ROOT

SOURCE = '''
import torch
import lightning.pytorch as pl


class UNet(pl.LightningModule):
    def __init__(self, in_channels, width=32, *, depth: int = 4):
        super().__init__()


def helper():
    pass
'''

RUN = textwrap.dedent("""
    import sys
    from advisor.cli import main
    rc = main(sys.argv[1:])
    print("RC", rc, "torch" in sys.modules, flush=True)
""")


def probe(tmp_path, *args):
    """The probe in a fresh interpreter (in the folder of the user's module, as they run it)."""
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    p = subprocess.run([sys.executable, "-c", RUN, "probe", "--no-store", *args], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300, check=False)
    last = p.stdout.strip().splitlines()[-1].split()
    return int(last[1]), last[2] == "True", p.stderr


@pytest.mark.parametrize(("args", "says"), [
    (("--workload", "nosuch.mod:Net"), "cannot import nosuch.mod: no module named 'nosuch.mod'"),
    (("--workload", "seg:Nope"), "module seg has no Nope"),
    (("--workload", "seg:helper"), "is not a LightningModule class"),
    (("--workload", "seg:UNet"), "needs 'in_channels'"),
    (("--workload", "seg:UNet", "--init-args", '{"in_channels": 3, "colour": 1}'), "takes no argument 'colour'"),
    (("--workload", "seg:UNet", "--init-args", "{not json"), "--init-args"),
    (("--workload", "seg:UNet", "--config", "missing.yaml"), "missing.yaml"),
])
def test_bad_input_is_refused_before_torch_is_imported(tmp_path, args, says):
    (tmp_path / "seg.py").write_text(SOURCE)
    rc, torch_imported, err = probe(tmp_path, *args)
    assert rc == 2 and not torch_imported, err
    assert says in err and len(err.strip().splitlines()) == 1


def test_good_input_passes_the_source_check():
    from lightning_module.contract.result import WorkloadSpec
    from lightning_module.contract.workload_source import check_source

    spec = WorkloadSpec(model="tests_seg_src:UNet", init_args={"in_channels": 3, "depth": 2})
    sys.path.insert(0, str(ROOT / "tests" / "data"))
    try:
        (ROOT / "tests" / "data" / "tests_seg_src.py").write_text(SOURCE)
        check_source(spec)  # no error; nothing imported
        assert "tests_seg_src" not in sys.modules
    finally:
        (ROOT / "tests" / "data" / "tests_seg_src.py").unlink()
        sys.path.remove(str(ROOT / "tests" / "data"))
    json.dumps(spec.model_dump())

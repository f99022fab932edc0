"""`advisor probe` end to end on this CPU with tiny workloads, and its one-line errors."""

from __future__ import annotations

import json

import pytest
from factories import fake_measurement, probe_result
from schema_check import checked

from advisor.store import ResultStore
from lightning_module.contract.ladder import EXTENSION_RUNGS
from lightning_module.contract.result import parse_result
from lightning_module.contract.workload_facts import FACTS

FAST = ("--max-seconds", "0.3", "--warmup-steps", "1", "--num-classes", "10", "--image-size", "32",
        "--remeasure", "0", "--confirm-rounds", "1")
EXTENSIONS = list(EXTENSION_RUNGS)


def test_mlp_probe_end_to_end_lands_in_the_store_and_results_list(cli, tmp_path):
    db, out = str(tmp_path / "r.db"), tmp_path / "res" / "mlp.json"
    code, stdout, err = cli("probe", "--workload", "mlp", "--start-batch-size", "16", *FAST,
                            "--skip", "compile,run_cpu", "--store", db, "--output", str(out))
    assert code == 0, err
    result = parse_result(out.read_text())
    assert result.workload_id == "mlp-32px-10c" and result.samples_per_sec > 0
    names = [r.rung for r in result.ladder]
    # the threads rung (one CPU rank, more than one core here): right after the baseline
    threads = [n for n in names if n.startswith("threads=")]
    assert names[1:1 + len(threads)] == threads and result.config.threads
    names = [n for n in names if n not in threads]
    assert names[:4] == ["baseline", "bf16", "channels_last", "compile"]
    assert any(n.startswith("batch=") for n in names) and names[-4:] == EXTENSIONS
    assert result.ladder[0].kept and result.ladder[0].status == "ok"
    # forward 2 x MACs; backward 2 x MACs for weights plus 2 x MACs for inputs, except the first layer
    assert result.flops_per_sample == 2 * (2 * 3 * 32 * 32 * 64 + 3 * 64 * 10)
    assert result.peak_tflops_matmul and result.utilisation_matmul and result.peak_memory_gib
    assert result.hardware.physical_cores and result.software.torch
    # One progress line per rung on stderr; the ladder table and summary on stdout.
    rung_lines = [x for x in err.splitlines() if x.startswith("probe: ") and not x.startswith("probe: confirm")]
    assert len(rung_lines) == len(result.ladder) + 1
    assert "reliable: " in stdout and result.reliable == (not result.unreliable_reasons)
    assert stdout.splitlines()[0].split()[:3] == ["rung", "status", "samples/s"]
    assert f"saved: result {result.result_id[:12]}" in stdout
    with ResultStore(db) as s:
        assert s.get(result.result_id) == result
    code, listed, _ = cli("results", "list", "--store", db)
    assert code == 0 and result.result_id[:12] in listed and "mlp-32px-10c" in listed


def as_machine(monkeypatch, **facts):
    """This machine's fingerprint, with the facts an --instance-type label is checked against replaced."""
    from lightning_module.run import hardware

    real = hardware.fingerprint()
    monkeypatch.setattr(hardware, "fingerprint", lambda: real.model_copy(update=facts))


def test_resnet18_at_32px_end_to_end(cli, tmp_path, monkeypatch):
    as_machine(monkeypatch, cpu_manufacturer="intel", logical_cpus=8, gpus=[])  # a c7i.2xlarge
    db = str(tmp_path / "r.db")
    code, stdout, err = cli("probe", "--workload", "resnet18", "--batch-size", "8", *FAST, "--max-steps", "3",
                            "--skip", "compile,workers,precision,run_cpu", "--store", db, "--format", "json",
                            "--instance-type", "c7i.2xlarge")
    assert code == 0, err
    doc = checked(stdout, "result")  # the whole result, as 'results show --format json'
    rows = [r for r in doc["result"]["ladder"] if not r["rung"].startswith("threads=")]  # (the threads rung)
    assert [r["rung"] for r in rows] == ["baseline", "bf16", "channels_last", "compile", "workers", *EXTENSIONS]
    assert rows[2]["status"] == "ok"  # a convolutional model: channels_last is tried
    with ResultStore(db) as s:
        (result,) = s.results(instance_type="c7i.2xlarge")
    assert result.workload_id == "resnet18-32px-10c" and result.config.batch_size == 8
    assert result.instance_type_source == "given"
    # The count measured at 224 px (workload_facts) scaled by pixels: exact for ResNet's strides
    # from 224 to 32 px; only the 10-class head differs, ~0.03 MFLOP of ~217.
    assert result.flops_per_sample == pytest.approx(FACTS["resnet18"].flops_per_sample(32), rel=0.01)


def test_an_instance_type_label_the_hardware_contradicts_is_refused(cli, monkeypatch):
    from recommend_catalogs import make_catalog

    from lightning_module.contract.instance_label import contradictions
    from lightning_module.contract.result import GpuInfo, HardwareFingerprint

    as_machine(monkeypatch, cpu_manufacturer="amd", cpu_model="AMD EPYC 7R13", logical_cpus=2, gpus=[])
    code, _, err = cli("probe", "--workload", "mlp", "--instance-type", "c7i.2xlarge", "--no-store")
    assert code == 2 and err.count("\n") == 1
    assert "c7i.2xlarge has Intel CPUs, this machine an AMD EPYC 7R13; c7i.2xlarge has 8 vCPUs, this machine 2" in err
    types = make_catalog().instance_types
    a10g = HardwareFingerprint(cpu_manufacturer="amd", logical_cpus=8, gpus=[GpuInfo(name="NVIDIA A10G", memory_gib=22.0)])
    assert contradictions(types["g5.2xlarge"], a10g) == []
    t4 = a10g.model_copy(update={"gpus": [GpuInfo(name="Tesla T4", memory_gib=15.0)]})
    assert contradictions(types["g5.2xlarge"], t4) == ["g5.2xlarge has A10G GPUs, this machine Tesla T4"]
    assert contradictions(types["c7i.2xlarge"], a10g)[-1] == "c7i.2xlarge has no GPU, this machine 1x NVIDIA A10G"


USER_MODULE = '''
import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Tiny(pl.LightningModule):
    def __init__(self, batch_size=4, num_classes=10):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, num_classes))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self):
        return DataLoader(TensorDataset(torch.randn(512, 3, 8, 8), torch.arange(512) % 10), batch_size=4)


class NoLoader(Tiny):
    train_dataloader = pl.LightningModule.train_dataloader


class Data(pl.LightningDataModule):
    def __init__(self, batch_size):
        super().__init__()
        self.batch_size = batch_size

    def train_dataloader(self):
        x = torch.randn(4096, 3, 8, 8)
        return DataLoader(TensorDataset(x, torch.arange(4096) % 10), batch_size=self.batch_size)


class NotAModule:
    pass
'''


@pytest.fixture
def user_pkg(user_module):
    return user_module("userwork", USER_MODULE)


def test_user_lightning_module_with_and_without_its_datamodule(cli, tmp_path, user_pkg):
    db = str(tmp_path / "r.db")
    common = ("--num-classes", "10", "--max-seconds", "0.2", "--warmup-steps", "1", "--store", db)
    code, _, err = cli("probe", "--workload", "userwork:Tiny", "--no-tune", "--batch-size", "4", *common)
    assert code == 0, err
    code, _, err = cli("probe", "--workload", "userwork:Tiny", "--datamodule", "userwork:Data",
                       "--batch-size", "4", "--skip", "compile,precision,run_cpu", "--confirm-rounds", "1", *common)
    assert code == 0, err
    with ResultStore(db) as s:
        with_dm, synthetic = s.results()
    assert with_dm.workload.datamodule == "userwork:Data" and with_dm.workload_id.startswith("custom-")
    assert with_dm.workload_id != synthetic.workload_id
    assert {r.rung: r.status for r in with_dm.ladder}["workers"] == "skipped"  # Data takes no num_workers
    assert {r.rung: r.status for r in with_dm.ladder}["ipex"] == "skipped"
    assert with_dm.flops_per_sample == 2 * 2 * 192 * 10  # no input gradient for the only layer


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (("--workload", "resnet9000"), "unknown workload"),
        (("--workload", "no_such_pkg.mod:Model"), "cannot import no_such_pkg.mod"),
        (("--workload", "json:loads"), "not a LightningModule"),
        (("--workload", "userwork:NotAModule"), "not a LightningModule"),
        (("--workload", "userwork:Missing"), "has no Missing"),
        (("--workload", "userwork:Tiny", "--datamodule", "userwork:Tiny"), "not a LightningDataModule"),
        (("--workload", "userwork:NoLoader"), "has no train_dataloader() and no --datamodule"),
        (("--workload", "userwork:Tiny", "--image-size", "8"), "takes no argument 'image_size'"),
        (("--batch-size", "0"), "must be at least 1"),
        (("--start-batch-size", "-4"), "must be at least 1"),
        (("--accelerator", "quantum"), "invalid choice"),
        (("--accelerator", "tpu"), "not available here"),
        (("--target-ci", "150%"), "between 0 and 1"),
        (("--skip", "warp"), "--skip: unknown warp"),
        (("--workload", "vit_b_16", "--image-size", "30"), "divisible by 16"),
        (("--accelerator", "cpu", "--precision", "16-mixed"), "16-mixed is not supported on cpu"),
        (("--strategy", "warp_drive"), "unknown --strategy 'warp_drive'"),
        (("--confirm-rounds", "11"), "must be between 0 and 10"),
        (("--remeasure", "-1"), "must be at least 0"),
        (("--skip", "run_cpu,warp"), "unknown warp: choose from"),
    ],
)
def test_bad_input_is_one_line_exit_2(cli, tmp_path, user_pkg, argv, needle):
    code, _, err = cli("probe", *argv, "--store", str(tmp_path / "r.db"))
    assert code == 2
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "r.db").exists() or ResultStore(tmp_path / "r.db").count() == 0


def test_gpu_not_available_here(cli, tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    code, _, err = cli("probe", "--accelerator", "gpu", "--workload", "mlp")
    assert code == 2 and "gpu is not available here" in err


def test_an_interrupted_probe_stores_nothing(cli, tmp_path, monkeypatch):
    from lightning_module.run import probe

    def interrupted(opts, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(probe, "run_probe", interrupted)
    db, out = tmp_path / "r.db", tmp_path / "out.json"
    code, _, err = cli("probe", "--workload", "mlp", "--store", str(db), "--output", str(out))
    assert code == 130 and "interrupted" in err
    assert not out.exists()
    assert not db.exists() or ResultStore(db).count() == 0


def test_run_probe_records_injected_compile_failure_and_oom(tmp_path):
    """The whole result assembly with the measuring seam replaced: failures are rungs, not crashes."""
    from lightning_module.contract.result import WorkloadSpec
    from lightning_module.run import probe

    def measure(rung, cfg):
        if cfg.compile:
            raise RuntimeError("BackendCompilerFailed: inductor exploded")
        if cfg.batch_size > 16:
            raise RuntimeError("DefaultCPUAllocator: not enough memory: you tried to allocate 1 GB. out of memory")
        v = 100.0 * (2 if cfg.precision == "bf16-mixed" else 1) * (0.5 if cfg.num_workers else 1) * (16 / cfg.batch_size) ** 0.1
        v *= 0.9 if cfg.run_cpu else 1
        return fake_measurement(v, cfg.batch_size)

    spec = WorkloadSpec(model="mlp", image_size=8, num_classes=10, batch_size=16)
    result = probe.run_probe(probe.ProbeOptions(spec=spec, matmul_seconds=0.05), measure_fn=measure)
    r = {x.rung: x for x in result.ladder}
    assert r["compile"].status == "failed" and "inductor exploded" in r["compile"].error
    assert r["batch=32"].status == "oom"
    assert r["batch=8"].status == "ok"  # the sweep went on below the limit
    assert result.config.precision == "bf16-mixed" and result.stop_reason == "converged"
    assert result.samples_per_sec == max(x.samples_per_sec for x in result.ladder if x.status == "ok")


def test_profile_writes_a_tensorboard_trace(cli, tmp_path):
    prof = tmp_path / "prof"
    # A rung may stop after 2 timed steps (--max-seconds, as on a busy machine): the profile pass
    # must still run the 8 steps its schedule needs before it writes a trace.
    code, stdout, err = cli("probe", "--workload", "mlp", "--no-tune", "--batch-size", "8", *FAST,
                            "--max-seconds", "0.001", "--profile", str(prof), "--no-store")
    assert code == 0, err
    traces = list(prof.glob("*.pt.trace.json*"))
    assert traces and f"profile: {prof / 'trace.json'}" in stdout
    chrome = json.loads((prof / "trace.json").read_text())  # Chrome/Perfetto: a traceEvents list
    assert any(e.get("name") == "ProfilerStep#5" for e in chrome["traceEvents"])


def test_an_output_path_that_cannot_be_written_fails_before_measuring(cli, tmp_path):
    blocker = tmp_path / "file.txt"
    blocker.write_text("not a directory")
    code, _, err = cli("probe", "--workload", "mlp", "--no-tune", "--batch-size", "8", *FAST,
                       "--store", str(tmp_path / "r.db"), "--output", str(blocker / "out.json"))
    assert code == 2 and "cannot create" in err and err.count("\n") == 1
    assert "probe: baseline" not in err  # nothing was measured, so nothing was thrown away


def test_output_interrupted_mid_write_leaves_no_file(tmp_path, monkeypatch):
    from advisor.commands import probe as probe_cmd

    def interrupted(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(probe_cmd.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        probe_cmd._write_result(tmp_path / "out.json", probe_result())
    assert list(tmp_path.iterdir()) == []

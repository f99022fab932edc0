"""The probe on the kinds of LightningModule people write, not only the examples: a vision
transformer, a recommender with sparse embedding tables and two optimizers, manual optimization,
configure_optimizers' dict form with a scheduler (one that watches a metric the probe never logs);
and LightningCLI's optimizer: / lr_scheduler: sections."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from lightning_module.contract.result import RESULT_SCHEMA_VERSION, WorkloadSpec, parse_result
from lightning_module.contract.workload_config import WorkloadConfigError, resolve

ROOT = Path(__file__).resolve().parents[3]
QUICK = ("--max-seconds", "5", "--warmup-steps", "1", "--max-steps", "3", "--remeasure", "0", "--confirm-rounds", "1")

MODELS = '''
import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Images(Dataset):
    def __init__(self, n=48, size=16, classes=4):
        self.n, self.size, self.classes = n, size, classes

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.randn(3, self.size, self.size, generator=g), i % self.classes


class TinyViT(pl.LightningModule):
    """Patch embedding (a strided convolution), a class token, a transformer encoder."""

    def __init__(self, image_size=16, patch=4, dim=16, depth=1, heads=2, classes=4, batch_size=8, plateau=False):
        super().__init__()
        self.save_hyperparameters()
        self.patch = nn.Conv2d(3, dim, patch, stride=patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.zeros(1, (image_size // patch) ** 2 + 1, dim))
        layer = nn.TransformerEncoderLayer(dim, heads, 2 * dim, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, depth)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        return self.head(self.encoder(x)[:, 0])

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self(x), y)
        self.log("train_loss", loss)
        return loss

    def train_dataloader(self):
        h = self.hparams
        return DataLoader(Images(size=h.image_size, classes=h.classes), batch_size=h.batch_size, drop_last=True)

    def configure_optimizers(self):
        opt = torch.optim.AdamW(self.parameters(), lr=1e-3)
        if self.hparams.plateau:  # watches a validation metric: the probe runs no validation
            sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt)
            return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "monitor": "val_loss"}}
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-3, total_steps=100_000)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


class Manual(pl.LightningModule):
    """Manual optimization: self.optimizers() and manual_backward need a Trainer."""

    def __init__(self, batch_size=16):
        super().__init__()
        self.save_hyperparameters()
        self.automatic_optimization = False
        self.net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        opt = self.optimizers()
        opt.zero_grad()
        loss = nn.functional.mse_loss(self.net(x).squeeze(-1), y)
        self.manual_backward(loss)
        opt.step()
        self.log("loss", loss)

    def train_dataloader(self):
        x = torch.randn(256, 8)
        return DataLoader(list(zip(x, x.sum(1))), batch_size=self.hparams.batch_size, drop_last=True)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)
'''


@pytest.fixture
def models(user_module):
    return user_module("kinds", MODELS)


def _probe(cli, tmp_path, *argv):
    out = tmp_path / "out.json"
    code, _, err = cli("probe", *QUICK, *argv, "--no-store", "--output", str(out))  # argv's options win
    assert code == 0, err
    assert "FLOPs not counted" not in err, err
    return parse_result(out.read_text())


def _statuses(r) -> dict[str, str]:
    return {x.rung: x.status for x in r.ladder}


def test_a_vision_transformer_gets_the_whole_ladder(cli, tmp_path, models):
    """Its patch embedding is a convolution: channels_last applies, as precision, workers, batch."""
    r = _probe(cli, tmp_path, "--workload", "kinds:TinyViT", "--skip", "compile,run_cpu")
    st = _statuses(r)
    # bf16 applies; on a CPU that emulates it the rung is measured for one step and skipped, said why,
    # or, where it won on a busy machine and no re-measurement ran quiet, rejected (contract/quiet.py)
    bf16 = next(x for x in r.ladder if x.rung == "bf16")
    assert bf16.status == "ok" or (bf16.status == "skipped" and "emulated" in repr(bf16)) or (
        bf16.status == "contended" and bf16.error.startswith("rejected: bf16 is emulated") and not bf16.kept), bf16
    assert st["channels_last"] == "ok" and st["workers"] == "skipped"
    assert not [k for k, v in st.items() if v == "failed"], st
    assert r.flops_per_sample > 0 and r.shape.memory_traffic_bytes_per_sample > 0
    assert r.shape.optimizer_state_bytes == pytest.approx(2 * r.shape.parameter_bytes, rel=0.01)  # AdamW
    # 48 images: a batch of 64 with drop_last is no batch, said as such (where the search got there).
    assert st.get("batch=64", "not-applicable") == "not-applicable"
    assert all("yields no batch at batch size 64" in x.error for x in r.ladder if x.rung == "batch=64")


def test_a_scheduler_watching_a_metric_the_probe_never_logs_does_not_fail_it(cli, tmp_path, models):
    # 48 images in batches of 16: an epoch ends every 3 steps, where the scheduler looks for val_loss.
    r = _probe(cli, tmp_path, "--workload", "kinds:TinyViT", "--init-args", '{"plateau": true, "batch_size": 16}',
               "--max-steps", "8", "--max-seconds", "60", "--no-tune")
    # 1 warm-up + 3 timed steps are past the first epoch's end, with room for steps a loaded machine
    # slowed (left out of the figure)
    assert r.samples_per_sec > 0 and r.ladder[0].config.batch_size == 16 and r.ladder[0].steps_timed >= 3


def test_manual_optimization_is_measured_and_counted(cli, tmp_path, models):
    r = _probe(cli, tmp_path, "--workload", "kinds:Manual", "--no-tune")
    # training_step calls self.optimizers(): counted in a Trainer, not beside one. 8->32->1: forward
    # 2 x 288 FLOPs, backward the weight gradients (576) and the hidden layer's input gradient (64).
    assert r.flops_per_sample == 1216 and r.shape.memory_traffic_bytes_per_sample > 0
    assert r.ladder[0].steps_timed == 3 and r.shape.optimizer_state_bytes == 0  # plain SGD keeps none


# --------------------------------------------------------------------------------------------
# The recommender example: sparse embedding tables, SparseAdam beside Adam, dict batches of ids


RECOMMENDER = '{"users": 2000, "items": 500, "dim": 8, "history": 4, "hidden": 16, "batch_size": 32}'


def test_the_recommender_with_sparse_tables_and_two_optimizers(cli, tmp_path):
    r = _probe(cli, tmp_path, "--workload", "examples.recommender:Recommender", "--init-args", RECOMMENDER,
               "--skip", "run_cpu", "--compile-timeout", "120")
    st = _statuses(r)
    assert st["channels_last"] == "skipped" and st["workers"] == "skipped"
    assert not [k for k, v in st.items() if v == "failed"], st
    # Two optimizers step each batch: the Trainer's global_step counts both, the probe counts batches.
    assert r.ladder[0].steps_timed == 3
    s = r.shape
    assert s.data_source == "module" and s.batch_tunable and r.config.batch_size in {32 * 2**k for k in range(-5, 9)}
    assert s.parameters == (2000 + 500 + 500) * 8 + 3 * 8 * 16 + 16 + 16 + 1
    # Adam's and SparseAdam's two moments, dense, for every parameter.
    assert s.optimizer_state_bytes == pytest.approx(2 * s.parameter_bytes, rel=0.01)
    # The MLP's FLOPs (lookups are none); the traffic of the rows a sample touches, not the tables':
    # a sparse gradient is counted as its indices and values, not as the dense table it stands for.
    assert r.flops_per_sample > 0
    assert 0 < s.memory_traffic_bytes_per_sample < 500 * 8 * 4


def test_the_dense_recommender_and_two_cpu_ranks(cli, tmp_path):
    dense = json.dumps({**json.loads(RECOMMENDER), "sparse": False})
    r = _probe(cli, tmp_path, "--workload", "examples.recommender:Recommender", "--init-args", dense, "--no-tune")
    assert r.flops_per_sample > 0 and r.ladder[0].steps_timed == 3
    # Sparse gradients all-reduced by DDP over gloo, the two optimizers stepped by hand on each rank.
    # In a process of its own: Lightning starts rank 1 by running the command line again.
    out = tmp_path / "ddp.json"
    done = subprocess.run([sys.executable, "-m", "advisor", "probe", "--workload", "examples.recommender:Recommender",
                           "--init-args", RECOMMENDER, *QUICK, "--no-tune", "--accelerator", "cpu", "--devices", "2",
                           "--strategy", "ddp", "--no-store", "--output", str(out)],
                          check=False, capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    r = parse_result(out.read_text())
    assert r.config.devices == 2 and r.samples_per_sec > 0 and r.flops_per_sample > 0


# --------------------------------------------------------------------------------------------
# LightningCLI's optimizer: and lr_scheduler:


def test_the_short_and_long_class_names_are_one_workload():
    a = resolve("m:C", None, optimizer="AdamW", lr_scheduler='{"class_path": "StepLR", "init_args": {"step_size": 5}}')
    b = resolve("m:C", None, optimizer='{"class_path": "torch.optim.AdamW"}',
                lr_scheduler='{"class_path": "torch.optim.lr_scheduler.StepLR", "init_args": {"step_size": 5}}')
    assert a.optimizer == b.optimizer == {"class_path": "torch.optim.AdamW", "init_args": {}}
    assert a.lr_scheduler == b.lr_scheduler
    assert resolve("m:C", None, optimizer="SGD", lr_scheduler="ReduceLROnPlateau").lr_scheduler["class_path"] == \
        "lightning.pytorch.cli.ReduceLROnPlateau"  # LightningCLI's, the one with a monitor
    spec = lambda **kw: WorkloadSpec(model="m:C", **kw)
    ids = {spec().workload_id, spec(optimizer=a.optimizer).workload_id,
           spec(optimizer={"class_path": "torch.optim.AdamW", "init_args": {"lr": 0.1}}).workload_id,
           spec(optimizer=a.optimizer, lr_scheduler=a.lr_scheduler).workload_id}
    assert len(ids) == 4  # another optimizer, its arguments, a scheduler: another workload
    # Without them, the id of before (schema 3 results still match their workload).
    assert WorkloadSpec(model="examples.tabular:TabularMLP", datamodule="examples.tabular:TableData",
                        init_args={"features": 32}).workload_id == "custom-a5f30d31eda2"
    assert WorkloadSpec(model="examples.tinylm:TinyLM").workload_id == "custom-9fe819248d8a"


def test_a_config_with_an_optimizer_is_probed_filed_and_found_by_recommend(cli, tmp_path):
    db, out = str(tmp_path / "r.db"), tmp_path / "lm.json"
    code, _, err = cli("probe", "--config", "examples/tinylm.yaml", *QUICK, "--no-tune", "--store", db,
                       "--output", str(out))
    assert code == 0, err
    r = parse_result(out.read_text())
    assert r.workload.optimizer.model_dump() == {"class_path": "torch.optim.AdamW",
                                                 "init_args": {"lr": 0.0006, "weight_decay": 0.1}}
    assert r.workload.lr_scheduler.class_path == "torch.optim.lr_scheduler.CosineAnnealingLR"
    assert r.shape.optimizer_state_bytes == pytest.approx(2 * r.shape.parameter_bytes, rel=0.01)
    assert r.schema_version == RESULT_SCHEMA_VERSION == 11
    assert 0 < r.shape.other_traffic_bytes_per_sample < r.shape.memory_traffic_bytes_per_sample
    base = ("recommend", "--budget", "100", "--deadline", "2d", "--samples", "1e6", "--store", db, "--format", "json")
    code, text, err = cli(*base, "--config", "examples/tinylm.yaml")
    assert code == 0, err
    assert json.loads(text)["workload_id"] == r.workload_id
    # The same module with its own configure_optimizers(), or another optimizer: not this result.
    model_only = tmp_path / "model.yaml"
    model_only.write_text("model:\n" + examples_section("examples/tinylm.yaml", "model"))
    for other in (("--config", str(model_only)), ("--config", "examples/tinylm.yaml", "--optimizer", "SGD")):
        code, _, err = cli(*base, *other)
        assert code == 2 and "no probe results" in err


def examples_section(path: str, name: str) -> str:
    import yaml

    return textwrap.indent(yaml.safe_dump(yaml.safe_load(open(path))[name]), "  ")


def test_the_optimizer_set_by_option_replaces_the_modules_own(cli, tmp_path, models):
    r = _probe(cli, tmp_path, "--workload", "kinds:Manual", "--no-tune",
               "--optimizer", '{"class_path": "SGD", "init_args": {"lr": 0.01, "momentum": 0.9}}')
    assert r.shape.optimizer_state_bytes == r.shape.parameter_bytes  # SGD's momentum: one buffer per parameter


def test_the_probe_plan_carries_the_optimizer():
    from advisor.recommend.jobspec import JobSpec
    from advisor.recommend.probeplan.commands import probe_commands

    opt = {"class_path": "torch.optim.AdamW", "init_args": {"lr": 0.001}}
    sched = {"class_path": "torch.optim.lr_scheduler.StepLR", "init_args": {"step_size": 5}}
    job = JobSpec(samples=1e6, budget_usd=10, deadline_hours=10, workload="m:C", optimizer=opt, lr_scheduler=sched)
    row = SimpleNamespace(region="us-east-1", market="on-demand", instance_type="g5.xlarge", cpu_too=False)
    launch, _, probe = probe_commands(job, [row])
    args = next(a for a in launch.argv if a.startswith("--probe-args="))
    assert "--optimizer" in args and "--lr-scheduler" in args
    flag = probe.argv.index("--optimizer")
    # What the line passes back names the same workload.
    u = resolve("m:C", None, optimizer=probe.argv[flag + 1], lr_scheduler=probe.argv[probe.argv.index("--lr-scheduler") + 1])
    assert (u.optimizer, u.lr_scheduler) == (opt, sched)


def test_launch_checks_the_optimizer_before_any_instance_boots():
    from advisor.commands.launch import check_probe_args
    from advisor.errors import AdvisorError

    check_probe_args("m:C", ["--optimizer", "AdamW", "--lr-scheduler", '{"class_path": "StepLR", "init_args": {"step_size": 5}}'])
    with pytest.raises(AdvisorError, match="--probe-args: --optimizer: not valid JSON"):
        check_probe_args("m:C", ["--optimizer", '{"class_path": "AdamW",'])
    with pytest.raises(AdvisorError, match="an lr_scheduler needs an optimizer"):
        check_probe_args("m:C", ["--lr-scheduler", "StepLR"])


@pytest.mark.parametrize("argv,needle", [
    (("--optimizer", "Adamw"), "optimizer 'torch.optim.Adamw': module torch.optim has no Adamw"),
    (("--optimizer", "torch.nn.Linear"), "is not a torch optimizer"),
    (("--optimizer", '{"class_path": "AdamW", "init_args": {"lrr": 1}}'), "unexpected keyword argument 'lrr'"),
    (("--optimizer", '{"class_path": "SGD", "init_args": {"lr": -1}}'), "Invalid learning rate"),
    (("--optimizer", '{"init_args": {"lr": 1}}'), "give the optimizer as a class name"),
    (("--optimizer", '{"class_path": "SGD", "init_args": {"params": []}}'), "params are the module's parameters"),
    (("--optimizer", "SGD", "--lr-scheduler", "StepLR"), "missing 1 required positional argument: 'step_size'"),
    (("--optimizer", "SGD", "--lr-scheduler", "torch.optim.SGD"), "is not a learning-rate scheduler"),
    (("--optimizer", "SGD", "--lr-scheduler", "torch.optim.lr_scheduler.ReduceLROnPlateau"), "needs the metric it watches"),
    (("--lr-scheduler", "StepLR"), "an lr_scheduler needs an optimizer"),
])
def test_a_bad_optimizer_or_scheduler_is_one_line_before_training(cli, models, argv, needle):
    code, _, err = cli("probe", "--workload", "kinds:Manual", *argv, "--no-store")
    assert code == 2, err
    assert needle in err and len(err.strip().splitlines()) == 1 and "probe:" not in err


def test_a_config_optimizer_section_that_is_not_one(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("model:\n  class_path: m.C\noptimizer:\n  lr: 0.1\n")
    with pytest.raises(WorkloadConfigError, match="optimizer: give the optimizer as a class name"):
        resolve(None, None, config=str(cfg))
    cfg.write_text("model:\n  class_path: m.C\noptimizer: AdamW\nlr_scheduler:\n  class_path: StepLR\n  extra: 1\n")
    with pytest.raises(WorkloadConfigError, match="unexpected key"):
        resolve(None, None, config=str(cfg))
    with pytest.raises(ValueError, match="not the builtin resnet18"):
        WorkloadSpec(model="resnet18", optimizer={"class_path": "torch.optim.SGD"})

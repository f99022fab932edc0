"""A training run launched by LightningCLI: the optimizer and scheduler it builds in place of the
module's configure_optimizers() name the run's workload as they name the probe's of the same config."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("jsonargparse")  # LightningCLI's parser (lightning[pytorch-extra]; the dev extra)

from lightning.pytorch.cli import LightningCLI

from advisor.cli import build_parser
from advisor.commands.probe import _spec
from lightning_module import ThroughputCallback
from lightning_module.contract.result import WorkloadSpec, parse_result
from lightning_module.run import hardware
from lightning_module.run.workloads import with_defaults

SMALL_LM = {"d_model": 16, "heads": 2, "layers": 1, "seq_len": 16, "vocab_size": 50}
CONFIG = f"""\
model:
  class_path: examples.tinylm.TinyLM
  init_args: {json.dumps(SMALL_LM)}
optimizer:
  class_path: AdamW
  init_args: {{lr: 0.002, weight_decay: 0.1, betas: [0.9, 0.95]}}
lr_scheduler:
  class_path: StepLR
  init_args: {{step_size: 5}}
"""


@pytest.fixture(autouse=True)
def off_ec2(monkeypatch):
    monkeypatch.setattr(hardware, "ec2_instance_type", lambda timeout=0.5: None)


def probe_id(*argv: str) -> str:
    """The id `advisor probe ARGV` files its result under (no probe run)."""
    return with_defaults(_spec(build_parser().parse_args(["probe", *argv]))[0]).workload_id  # as _probe files it


def run_cli(tmp_path, *args: str, **cli_kw):
    """LightningCLI(run=False) as a training script uses it, with the callback, then fit()."""
    out = tmp_path / "run.json"
    cb = ThroughputCallback(output=out, warmup_steps=1, time_pipeline=False)
    cli = LightningCLI(run=False, args=[*args, "--trainer.max_steps=5", "--trainer.accelerator=cpu",
                                        "--trainer.logger=false", "--trainer.enable_checkpointing=false",
                                        "--trainer.enable_progress_bar=false", "--trainer.enable_model_summary=false",
                                        f"--trainer.default_root_dir={tmp_path}"],
                       trainer_defaults={"callbacks": [cb]}, **cli_kw)
    cli.trainer.fit(cli.model)
    assert cb.error is None, cb.error
    return parse_result(out.read_bytes())


@pytest.mark.parametrize("save_config", [True, False], ids=["parsed-config", "read-back"])
def test_a_cli_config_s_optimizer_names_the_run_as_the_probe_of_that_config(tmp_path, save_config):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(CONFIG)
    kw = {} if save_config else {"save_config_callback": None}  # then read back off the built objects
    r = run_cli(tmp_path, f"--config={cfg}", **kw)
    assert r.workload_id == probe_id("--config", str(cfg))
    assert r.workload.optimizer.class_path == "torch.optim.AdamW"
    assert r.workload.optimizer.init_args == {"lr": 0.002, "weight_decay": 0.1, "betas": [0.9, 0.95]}
    assert r.workload.lr_scheduler.model_dump() == {"class_path": "torch.optim.lr_scheduler.StepLR",
                                                    "init_args": {"step_size": 5}}


def test_command_line_optimizer_flags_name_it_as_the_probe_s_flags(tmp_path):
    init = json.dumps(SMALL_LM)
    r = run_cli(tmp_path, "--model=examples.tinylm.TinyLM", f"--model.init_args={init}", "--optimizer=SGD",
                "--optimizer.lr=0.05", "--lr_scheduler=ExponentialLR", "--lr_scheduler.gamma=0.9")
    assert r.workload_id == probe_id("--workload", "examples.tinylm:TinyLM", "--init-args", init,
                                     "--optimizer", '{"class_path": "SGD", "init_args": {"lr": 0.05}}',
                                     "--lr-scheduler", '{"class_path": "ExponentialLR", "init_args": {"gamma": 0.9}}')
    # another optimizer is another workload
    assert r.workload_id != probe_id("--workload", "examples.tinylm:TinyLM", "--init-args", init,
                                     "--optimizer", '{"class_path": "AdamW", "init_args": {"lr": 0.05}}',
                                     "--lr-scheduler", '{"class_path": "ExponentialLR", "init_args": {"gamma": 0.9}}')


def test_the_module_s_own_configure_optimizers_keeps_the_old_id(tmp_path):
    init = json.dumps(SMALL_LM)
    r = run_cli(tmp_path, "--model=examples.tinylm.TinyLM", f"--model.init_args={init}")
    assert r.workload.optimizer is None and r.workload.lr_scheduler is None
    assert r.workload_id == with_defaults(WorkloadSpec(model="examples.tinylm:TinyLM", init_args=SMALL_LM)).workload_id
    assert r.workload_id == probe_id("--workload", "examples.tinylm:TinyLM", "--init-args", init)


PLATEAU = {"class_path": "ReduceLROnPlateau", "init_args": {"monitor": "train_loss", "patience": 3}}


def test_lightning_s_reduce_lr_on_plateau_is_named_as_the_probe_names_it(tmp_path):
    init = json.dumps(SMALL_LM)
    r = run_cli(tmp_path, "--model=examples.tinylm.TinyLM", f"--model.init_args={init}", "--optimizer=AdamW",
                "--lr_scheduler=ReduceLROnPlateau", "--lr_scheduler.monitor=train_loss", "--lr_scheduler.patience=3")
    assert r.workload.lr_scheduler.model_dump() == {"class_path": "lightning.pytorch.cli.ReduceLROnPlateau",
                                                    "init_args": {"monitor": "train_loss", "patience": 3}}
    assert r.workload_id == probe_id("--workload", "examples.tinylm:TinyLM", "--init-args", init,
                                     "--optimizer", "AdamW", "--lr-scheduler", json.dumps(PLATEAU))


def test_a_scheduler_that_cannot_be_read_back_without_the_parsed_config_is_not_guessed(tmp_path):
    # ReduceLROnPlateau keeps min_lr as min_lrs: without SaveConfigCallback its arguments are unknown
    out = tmp_path / "run.json"
    cb = ThroughputCallback(output=out, warmup_steps=1, time_pipeline=False)
    cli = LightningCLI(run=False, save_config_callback=None, trainer_defaults={"callbacks": [cb]},
                       args=["--model=examples.tinylm.TinyLM", f"--model.init_args={json.dumps(SMALL_LM)}",
                             "--optimizer=AdamW", "--lr_scheduler=ReduceLROnPlateau",
                             "--lr_scheduler.monitor=train_loss", "--trainer.max_steps=3", "--trainer.logger=false",
                             "--trainer.enable_checkpointing=false", "--trainer.enable_progress_bar=false",
                             f"--trainer.default_root_dir={tmp_path}"])
    with pytest.warns(UserWarning, match="cannot be read back"):
        cli.trainer.fit(cli.model)
    assert "min_lr" in cb.error and "SaveConfigCallback" in cb.error and not out.exists()

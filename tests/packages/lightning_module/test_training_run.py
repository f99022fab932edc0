"""The training-run callback (lightning_module.ThroughputCallback): a user's own Trainer, timed as
the probe times, written as a `training run` result that import, list and recommend use."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch
from recommend_catalogs import write_catalog

from examples.tabular import TableData, TabularMLP
from examples.tinylm import TinyLM
from lightning_module import ThroughputCallback, TrainingRunError
from lightning_module.contract.result import MAX_BATCH_SIZE, WorkloadSpec, parse_result
from lightning_module.run import hardware, training_run
from lightning_module.run.workloads import constructor_defaults

ROOT = Path(__file__).resolve().parents[3]
SMALL_LM = {"d_model": 16, "heads": 2, "layers": 1, "seq_len": 16, "vocab_size": 50}


def fit(module, callback, steps: int = 14, datamodule=None, **trainer_kw):
    trainer = pl.Trainer(max_steps=steps, accelerator="cpu", devices=1, callbacks=[callback], logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                         **trainer_kw)
    trainer.fit(module, datamodule=datamodule)
    return trainer


@pytest.fixture(autouse=True)
def off_ec2(monkeypatch):
    monkeypatch.setattr(hardware, "ec2_instance_type", lambda timeout=0.5: None)


def test_a_training_run_is_written_as_a_strict_record(tmp_path):
    out = tmp_path / "run.json"
    cb = ThroughputCallback(output=out, warmup_steps=2)
    fit(TinyLM(**SMALL_LM), cb)
    assert cb.error is None and cb.written == out
    r = parse_result(out.read_bytes())  # what `advisor results import` reads
    assert r.source == "training run" and r.ladder == [] and r.stop_reason == "training ended"
    # named as `advisor recommend --workload examples.tinylm:TinyLM --init-args ...` names it
    assert r.workload.model == "examples.tinylm:TinyLM" and r.workload.init_args == SMALL_LM
    # ... with the constructor's defaults the probe records (the id is of the arguments as built)
    assert r.workload.init_arg_defaults == constructor_defaults(TinyLM)
    assert r.workload_id == WorkloadSpec(model="examples.tinylm:TinyLM", init_args=SMALL_LM,
                                         init_arg_defaults=constructor_defaults(TinyLM)).workload_id
    seen = r.contention.steps if r.contention is not None else r.step_time.n_steps  # under load: fewer clean
    assert seen == 12 and r.step_time.n_steps <= 12 and r.step_time.warmup_steps == 2
    lo, hi = r.samples_per_sec_ci
    assert lo <= r.samples_per_sec <= hi
    assert r.samples_per_sec == pytest.approx(16 / r.step_time.mean_s, rel=0.05)  # batch 16 (its hparams)
    assert r.config.batch_size == 16 and r.config.precision == "32-true" and r.config.accelerator == "cpu"
    assert r.config.threads == torch.get_num_threads()  # the intra-op threads it trained with, as a probe records them
    n_params = sum(p.numel() for p in TinyLM(**SMALL_LM).parameters())
    assert r.shape.parameters == n_params  # AdamW: 2 moments per parameter, and a step count per tensor
    assert 2 * 4 * n_params <= r.shape.optimizer_state_bytes < 2 * 4 * n_params + 1024
    assert r.shape.data_source == "module" and r.shape.memory.points[0].batch_size == 16
    assert r.flops_per_sample and r.flops_per_sample > 2 * n_params  # counted on the first step
    assert r.contention is not None and r.contention.steps == 12  # every timed step judged, in windows


def test_the_record_carries_the_probe_s_shape_fields_each_saying_how(tmp_path):
    from lightning_module.run.peaks import per_sample_counts

    out = tmp_path / "run.json"
    module = TinyLM(**SMALL_LM)
    first = next(iter(module.train_dataloader()))
    fit(module, ThroughputCallback(output=out, warmup_steps=2))
    r = parse_result(out.read_bytes())
    s = r.shape
    # memory: derived from the one batch trained, marked so, and exact at that batch
    fit_ = s.memory
    assert fit_.derived and fit_.where == "host" and [p.batch_size for p in fit_.points] == [16]
    assert "derived from one batch size" in fit_.note and "gradients + optimizer state" in fit_.note
    assert fit_.gib_at(16) == pytest.approx(r.peak_memory_gib)
    assert 0 < fit_.fixed_gib <= r.peak_memory_gib and fit_.per_sample_gib >= 0
    # traffic: the probe's counter over the first step, at its batch; an upper bound of the probe's
    # own count (the difference between 2 and 4 samples), which the weights' traffic does not enter
    spec = WorkloadSpec(model="examples.tinylm:TinyLM", init_args=SMALL_LM, batch_size=16)
    _, probe_traffic, probe_other, probe_ops = per_sample_counts(spec, first)
    assert s.memory_traffic_bytes_per_sample >= 0.99 * probe_traffic
    assert s.other_traffic_bytes_per_sample >= 0.99 * probe_other and probe_other < probe_traffic
    # ops: the same counter over the same training_step and backward, so the probe's count within a
    # few ops (the run's own first step does a little more than the probe's closure-only step)
    assert probe_ops > 0 and abs(s.ops_per_step - probe_ops) <= 0.05 * probe_ops
    assert "batch of 16" in s.memory_traffic_note and "upper bound" in s.memory_traffic_note
    # the loader alone, timed after training as the probe times it
    assert r.pipeline_samples_per_sec_per_worker and r.pipeline_samples_per_sec_per_worker > 0


def test_counting_and_the_pipeline_can_be_turned_off(tmp_path):
    out = tmp_path / "run.json"
    fit(TinyLM(**SMALL_LM), ThroughputCallback(output=out, warmup_steps=1, count_flops=False, time_pipeline=False),
        steps=5)
    r = parse_result(out.read_bytes())
    assert r.flops_per_sample is None and r.shape.memory_traffic_bytes_per_sample is None and r.shape.ops_per_step is None
    assert r.shape.other_traffic_bytes_per_sample is None
    assert r.shape.memory_traffic_note is None and r.pipeline_samples_per_sec_per_worker is None


def test_the_derived_memory_fit_reaches_recommend(cli, tmp_path, monkeypatch):
    # A run on a c7i.8xlarge whose process peaked at 20 GiB: a 16 GiB c7i.2xlarge cannot hold it.
    monkeypatch.setattr(hardware, "ec2_instance_type", lambda timeout=0.5: "c7i.8xlarge")
    monkeypatch.setattr(training_run, "peak_gib", lambda accelerator: 20.0)
    out, store = tmp_path / "run.json", str(tmp_path / "r.sqlite")
    fit(TinyLM(**SMALL_LM), ThroughputCallback(output=out, warmup_steps=2, time_pipeline=False))
    assert cli("results", "import", str(out), "--store", store)[0] == 0
    code, doc, err = cli("recommend", "--workload", "examples.tinylm:TinyLM", "--init-args", json.dumps(SMALL_LM),
                         "--samples", "1e5", "--budget", "1000", "--deadline", "30d",
                         "--catalog", write_catalog(tmp_path / "cat.json"), "--store", store, "--format", "json",
                         "--top", "50", "--show-excluded")
    assert code == 0, err
    doc = json.loads(doc)
    excluded = {e["instance_type"]: e["reason"] for e in doc["excluded"]}
    assert excluded["c7i.2xlarge"] == ("needs 20.0 GiB at batch 16 (your training run's memory fit, derived from "
                                       "one batch size); the host has 16")
    assert any(r["instance_type"] == "c7i.8xlarge" for r in doc["recommendations"])


def test_the_datamodule_names_the_workload_with_its_arguments(tmp_path):
    out = tmp_path / "run.json"
    fit(TabularMLP(hidden=16), ThroughputCallback(output=out, warmup_steps=1), steps=6,
        datamodule=TableData(rows=256, batch_size=32))
    r = parse_result(out.read_bytes())
    assert r.workload.datamodule == "examples.tabular:TableData"
    assert r.workload.init_args == {"hidden": 16} and r.workload.data_init_args == {"rows": 256}  # batch_size: tuned, not named
    assert r.shape.data_source == "datamodule" and r.config.batch_size == 32


def test_import_list_and_recommend_use_it(cli, tmp_path, monkeypatch):
    # On EC2, the instance type comes from the metadata (here: faked); recommend ranks it as measured.
    monkeypatch.setattr(hardware, "ec2_instance_type", lambda timeout=0.5: "c7i.2xlarge")
    out, store = tmp_path / "run.json", str(tmp_path / "r.sqlite")
    fit(TinyLM(**SMALL_LM), ThroughputCallback(output=out, warmup_steps=2))
    code, _, err = cli("results", "import", str(out), "--store", store)
    assert code == 0, err
    code, listed, _ = cli("results", "list", "--store", store, "--format", "json")
    row = json.loads(listed)["results"][0]
    assert row["source"] == "training run" and row["instance_type"] == "c7i.2xlarge"
    code, table, _ = cli("results", "list", "--store", store)
    assert "(training" in table
    code, shown, _ = cli("results", "show", row["result_id"], "--store", store)
    assert code == 0 and "training run" in shown and "no ladder: the configuration the run trained with" in shown
    assert "memory fit (derived)" in shown and "an upper bound" in shown and "data pipeline" in shown  # its shape
    catalog = write_catalog(tmp_path / "cat.json")
    code, doc, err = cli("recommend", "--workload", "examples.tinylm:TinyLM", "--init-args", json.dumps(SMALL_LM),
                         "--samples", "1e5", "--budget", "1000", "--deadline", "30d", "--catalog", catalog,
                         "--store", store, "--format", "json", "--top", "50")
    assert code == 0, err
    rows = [r for r in json.loads(doc)["recommendations"] if r["instance_type"] == "c7i.2xlarge" and r["count"] == 1]
    assert rows and rows[0]["throughput_source"] == "measured" and rows[0]["basis"]["measured_by"] == "training run"
    assert any("training run" in n for n in rows[0]["notes"])


def test_the_store_is_written_directly(tmp_path):
    from advisor.store import ResultStore

    with ResultStore(tmp_path / "r.sqlite") as store:
        cb = ThroughputCallback(store=store, warmup_steps=2)
        fit(TinyLM(**SMALL_LM), cb, steps=6)
        assert cb.written is None and [r.result_id for r in store.results()] == [cb.result.result_id]


def test_without_a_destination_the_file_lands_in_the_root_dir(tmp_path):
    cb = ThroughputCallback(warmup_steps=1)
    fit(TinyLM(**SMALL_LM), cb, steps=5, default_root_dir=str(tmp_path))
    assert cb.written.parent == tmp_path and cb.written.name.startswith("advisor-training-run-")


class Stops(TinyLM):
    def training_step(self, batch, batch_idx):
        if batch_idx == 8:
            raise RuntimeError("stopped by hand")
        return super().training_step(batch, batch_idx)


def test_an_interrupted_run_still_records_what_it_timed(tmp_path):
    out = tmp_path / "run.json"
    with pytest.raises(RuntimeError, match="stopped by hand"):
        fit(Stops(**SMALL_LM), ThroughputCallback(output=out, warmup_steps=2), steps=50)
    r = parse_result(out.read_bytes())
    # 6 timed steps seen; under load the figure may rest on fewer (clean_steps leaves slowed ones out)
    seen = r.contention.steps if r.contention is not None else r.step_time.n_steps
    assert r.stop_reason == "interrupted (RuntimeError)" and seen == 6 and r.step_time.n_steps <= 6
    assert r.pipeline_samples_per_sec_per_worker is None  # an interrupted run's loader is not read again


VALIDATION_S = 1.5  # longer than any step of the tiny model, even on a busy machine


class SlowValidation(TinyLM):
    def validation_step(self, batch, batch_idx):
        time.sleep(VALIDATION_S)

    def val_dataloader(self):
        return self.train_dataloader()


def test_validation_passes_are_no_step_s_time(tmp_path):
    out = tmp_path / "run.json"
    # a validation after every second step: counted, they would be half the timed steps
    fit(SlowValidation(**SMALL_LM), ThroughputCallback(output=out, warmup_steps=1), steps=9,
        val_check_interval=2, limit_val_batches=1, num_sanity_val_steps=0)
    r = parse_result(out.read_bytes())
    # 8 timed steps seen; the figure leaves out any the machine's load slowed (clean_steps), so
    # under load it can rest on fewer: what must hold is that no validation pass is among them.
    seen = r.contention.steps if r.contention is not None else r.step_time.n_steps
    assert seen == 8 and r.step_time.n_steps <= 8 and r.step_time.p90_s < VALIDATION_S


@pytest.mark.parametrize("kwargs, words", [
    ({"store": object()}, r"has no add\(result\)"),
    ({"instance_type": "../etc"}, "not an instance type name"),
    ({"warmup_steps": -1}, "warmup_steps=-1"),
    ({"target_ci": 2}, "target_ci=2"),
    ({"workload": 3}, "workload= is a name"),
    ({"output": "{tmp}/a-file/run.json"}, "is not a folder"),
])
def test_a_wrong_setting_is_one_line_before_training(tmp_path, kwargs, words):
    (tmp_path / "a-file").write_text("")
    if "output" in kwargs:
        kwargs = {"output": kwargs["output"].replace("{tmp}", str(tmp_path))}
    with pytest.raises(TrainingRunError, match=words) as e:
        ThroughputCallback(**kwargs)
    assert "\n" not in str(e.value)


def test_a_label_that_is_not_this_machine_is_refused(monkeypatch):
    from lightning_module.contract.result import HardwareFingerprint

    monkeypatch.setattr(hardware, "fingerprint", lambda: HardwareFingerprint(
        cpu_model="AMD EPYC", cpu_manufacturer="amd", logical_cpus=2, physical_cores=1))
    with pytest.raises(TrainingRunError, match="c7i.2xlarge has Intel CPUs"):
        ThroughputCallback(instance_type="c7i.2xlarge")


class Huge(TinyLM):
    def samples_in_batch(self, batch) -> int:
        return MAX_BATCH_SIZE * 4  # past any batch: the record cannot be true


class Opaque(TabularMLP):
    def __init__(self, hidden: int = 128, act=None):
        super().__init__(hidden=hidden)
        self.save_hyperparameters()


@pytest.mark.parametrize("module, trainer_kw, words", [
    (lambda: Huge(**SMALL_LM), {}, "training-run result: invalid"),  # refused by the strict models, one line
    (lambda: TinyLM(**SMALL_LM), {"precision": "bf16-true"}, "precision bf16-true"),
    (lambda: Opaque(act=torch.nn.ReLU()), {}, "hyper-parameter 'act'"),
])
def test_a_run_that_cannot_be_recorded_says_why_and_writes_nothing(tmp_path, module, trainer_kw, words):
    out = tmp_path / "run.json"
    cb = ThroughputCallback(output=out, warmup_steps=1)
    dm = TableData(rows=128, batch_size=16) if isinstance(module(), TabularMLP) else None
    with pytest.warns(UserWarning, match="training-run throughput not recorded"):
        fit(module(), cb, steps=5, datamodule=dm, **trainer_kw)
    assert words in cb.error and "\n" not in cb.error and not out.exists()


def test_too_short_a_run_writes_nothing(tmp_path):
    out = tmp_path / "run.json"
    cb = ThroughputCallback(output=out, warmup_steps=3)
    with pytest.warns(UserWarning, match="too short"):
        fit(TinyLM(**SMALL_LM), cb, steps=4)
    assert not out.exists()


def test_the_machine_is_looked_at_less_often_when_looking_costs(tmp_path, monkeypatch):
    # A look that costs as much as a step: read every ~1/READ_BUDGET steps, the verdicts still one per step.
    real = training_run.read_now

    def slow_read():
        time.sleep(0.002)
        return real()

    monkeypatch.setattr(training_run, "read_now", slow_read)
    out = tmp_path / "run.json"
    cb = ThroughputCallback(output=out, warmup_steps=1)
    fit(TabularMLP(features=4, hidden=8), cb, steps=40, datamodule=TableData(rows=2048, features=4, batch_size=4))
    r = parse_result(out.read_bytes())
    assert cb._every > 1 and r.contention.steps == 39 and r.step_time.n_steps <= 39  # 40 steps, 1 warm-up


def test_a_class_without_an_importable_name_says_so(tmp_path):
    class Local(TinyLM):  # defined in a function: "<locals>" in its name, which no probe can import
        pass

    out = tmp_path / "run.json"
    cb = ThroughputCallback(output=out, warmup_steps=1)
    with pytest.warns(UserWarning, match="cannot name the workload"):
        fit(Local(**SMALL_LM), cb, steps=4)
    assert "pass workload=" in cb.error and not out.exists()
    # named by hand, the same run is recorded
    named = ThroughputCallback(output=out, warmup_steps=1, workload="examples.tinylm:TinyLM", init_args={"d_model": 16})
    fit(Local(**SMALL_LM), named, steps=4)
    assert parse_result(out.read_bytes()).workload.init_args == {"d_model": 16}


DDP_SCRIPT = Path(__file__).with_name("ddp_training_run.py")


@pytest.mark.parametrize("mode, per_step", [("equal", 16), ("uneven", 20)])
def test_two_ddp_ranks_write_one_record_from_rank_0_counting_every_rank(tmp_path, mode, per_step):
    # Lightning's own launcher: the script is rank 0 and starts rank 1 by running itself again.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(DDP_SCRIPT), str(tmp_path), mode], check=False, env=env,
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["world_size"] for r in ranks] == [2, 2] and [r["error"] for r in ranks] == [None, None]
    assert ranks[0]["written"] and ranks[1]["written"] is None  # rank 0 wrote; rank 1 did not
    assert sorted(p.name for p in tmp_path.glob("run-*.json")) == ["run-rank0.json"]
    r = parse_result((tmp_path / "run-rank0.json").read_bytes())
    assert r.result_id == ranks[0]["result_id"]
    assert r.config.devices == 2 and r.config.num_nodes == 1 and r.config.strategy == "ddp"
    assert r.config.threads is None  # several ranks: Lightning divides the cores among them
    # every rank's samples: 8 + 8, or rank 1's 12 beside rank 0's 8 (gathered, not rank 0's x 2)
    assert r.samples_per_sec * r.step_time.mean_s == pytest.approx(per_step, rel=1e-6)
    assert r.config.batch_size == per_step // 2
    assert r.shape.memory.points[0].batch_size == 8  # rank 0's own memory, at its own batch
    if mode == "uneven":  # rank 0 waits for the slower rank in the all-reduce: its steps hold rank 1's sleep
        assert r.step_time.median_s >= 0.02
    assert r.contention.own_load >= 2  # both ranks are this run's load, not another's


def test_on_a_gpu_the_fit_is_of_device_memory_from_what_was_allocated_at_the_start():
    # The CUDA branch without a GPU: the memory in use at the start is given as the callback reads it there.
    cb = ThroughputCallback()
    cb._base_gib = 1.0  # torch.cuda.memory_allocated() at on_train_start: weights and buffers
    module = torch.nn.Linear(1024, 1024)  # 4 MiB of fp32 weights: 4 MiB of gradients
    fit_ = cb._memory_fit(module, True, 64, 9.0, {"optimizer_state_bytes": 8.0 * 2**20})
    grads = sum(p.numel() * 4 for p in module.parameters()) / 2**30
    assert fit_.where == "accelerator" and fit_.derived and "allocated on the device" in fit_.note
    assert fit_.fixed_gib == pytest.approx(1.0 + grads + 8 / 1024)
    assert fit_.per_sample_gib == pytest.approx((9.0 - fit_.fixed_gib) / 64)
    cb._base_gib = None  # an accelerator the callback cannot read (MPS, XLA): one point, no fit
    assert cb._memory_fit(module, False, 64, 9.0, {}).fixed_gib is None


def test_an_fsdp_run_on_two_cpu_ranks_records_its_strategy_and_each_ranks_peak(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(DDP_SCRIPT), str(tmp_path), "fsdp"], check=False, env=env,
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    r = parse_result((tmp_path / "run-rank0.json").read_bytes())
    assert r.config.strategy == "fsdp" and r.config.devices == 2
    assert len(r.rank_peak_memory_gib) == 2 and all(g > 0 for g in r.rank_peak_memory_gib)
    assert r.rank_peak_memory_gib[0] == pytest.approx(r.peak_memory_gib)  # rank 0's own, first

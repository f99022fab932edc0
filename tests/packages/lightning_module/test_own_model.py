"""Your own LightningModule in the probe: its data (DataModule, its own loader, synthetic for the
builtins), batches of any structure, its constructor arguments (JSON, LightningCLI YAML), its batch
size Lightning's way, its shape recorded; and the one-line errors."""

from __future__ import annotations

import dataclasses
import json
import textwrap
from collections import namedtuple

import pytest
import torch

from advisor.store import ResultStore
from lightning_module.contract.result import (
    RESULT_SCHEMA_VERSION,
    MemoryFit,
    ProbeResult,
    WorkloadSpec,
    parse_result,
)
from lightning_module.contract.workload_config import WorkloadConfigError, read_config, resolve
from lightning_module.run.batches import first_tensor, leading_dim, set_batch_size

QUICK = ("--max-seconds", "0.2", "--warmup-steps", "1", "--max-steps", "3", "--remeasure", "0",
         "--confirm-rounds", "1", "--skip", "compile,run_cpu,precision")
TINY_LM = '{"d_model": 16, "heads": 2, "layers": 1, "seq_len": 8, "vocab_size": 50}'


# --------------------------------------------------------------------------------------------
# The examples, probed from the CLI


def test_the_language_model_runs_on_its_own_token_loader(cli, tmp_path):
    out = tmp_path / "lm.json"
    code, _, err = cli("probe", "--workload", "examples.tinylm:TinyLM", "--init-args", TINY_LM, *QUICK,
                       "--skip", "workers,compile,run_cpu,precision", "--store", str(tmp_path / "r.db"), "--output", str(out))
    assert code == 0, err
    r = parse_result(out.read_text())
    assert "module data, batch 16" in err  # the author's batch_size hparam is where it starts
    # The batch search starts at the author's 16 and doubles or halves while it pays: where it stops
    # depends on the machine's speed, not on this test.
    assert r.workload.init_args == json.loads(TINY_LM) and r.config.batch_size in {16 * 2**k for k in range(-4, 9)}
    s = r.shape
    assert s.data_source == "module" and s.batch_tunable and s.samples_counted_by == "batch"
    assert s.parameters == s.trainable_parameters > 0 and s.parameter_bytes == 4 * s.parameters
    assert s.optimizer_state_bytes == pytest.approx(2 * s.parameter_bytes, rel=0.01)  # AdamW: two moments (+ steps)
    assert s.memory is not None and len(s.memory.points) >= 2 and s.memory.where == "host"
    assert r.pipeline_samples_per_sec_per_worker > 0 and r.flops_per_sample > 0 and s.memory_traffic_bytes_per_sample > 0
    assert s.ops_per_step and s.ops_per_step > 50  # a two-layer transformer step: over a hundred ops
    assert {x.rung: x.status for x in r.ladder}["channels_last"] == "skipped"  # not a convolutional model


def test_the_tabular_config_runs_unchanged_and_recommend_finds_it(cli, tmp_path):
    db = str(tmp_path / "r.db")
    code, _, err = cli("probe", "--config", "examples/tabular.yaml", *QUICK, "--no-tune", "--store", db)
    assert code == 0, err
    with ResultStore(db) as store:
        (r,) = store.results()
    assert r.workload.model == "examples.tabular:TabularMLP" and r.workload.datamodule == "examples.tabular:TableData"
    assert r.workload.init_args == {"features": 32, "hidden": 64, "classes": 4}
    assert r.config.batch_size == 32 and r.shape.data_source == "datamodule"  # the config's batch_size
    assert r.shape.optimizer_state_bytes > 0  # Adam's state
    # The same options name the same workload in recommend; other arguments name another.
    base = ("recommend", "--budget", "100", "--deadline", "2d", "--samples", "1e6", "--store", db, "--format", "json")
    code, out, err = cli(*base, "--config", "examples/tabular.yaml")
    assert code == 0, err
    assert json.loads(out)["workload_id"] == r.workload_id
    code, _, err = cli(*base, "--config", "examples/tabular.yaml", "--init-args", '{"hidden": 65}')
    assert code == 2 and "no probe results" in err


# --------------------------------------------------------------------------------------------
# A user's module: data sources, batch structures, batch size

USER = '''
import dataclasses
from collections import namedtuple

import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

Pair = namedtuple("Pair", "x y")


@dataclasses.dataclass
class Rec:
    x: torch.Tensor
    y: torch.Tensor


class Rows(Dataset):
    def __init__(self, shape, n=256, empty=False):
        self.shape, self.n = shape, 0 if empty else n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        x, y = torch.randn(4), torch.tensor(i % 3)
        if self.shape == "tensor":
            return torch.cat([x, y[None].float()])
        if self.shape == "tuple":
            return x, y
        if self.shape == "list":
            return [x, y]
        if self.shape == "dict":
            return {"features": {"x": x}, "meta": "row", "y": y}
        if self.shape == "namedtuple":
            return Pair(x, y)
        if self.shape == "notensor":
            return "just text"
        raise ValueError(self.shape)


def collate_rec(items):
    return Rec(torch.stack([a for a, _ in items]), torch.stack([b for _, b in items]))


def split(batch):
    if isinstance(batch, torch.Tensor):
        return batch[:, :4], batch[:, 4].long()
    if isinstance(batch, dict):
        return batch["features"]["x"], batch["y"]
    if isinstance(batch, Rec):
        return batch.x, batch.y
    return batch[0], batch[1]


class Table(pl.LightningModule):
    def __init__(self, shape="tuple", hidden=8, batch_size=8, empty=False):
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(4, hidden), nn.ReLU(), nn.Linear(hidden, 3))

    def training_step(self, batch, batch_idx):
        assert type(batch).__name__ in self.expected_types, type(batch)  # moved unchanged in type
        x, y = split(batch)
        return nn.functional.cross_entropy(self.net(x), y)

    expected_types = ("Tensor", "tuple", "list", "dict", "Pair", "Rec")

    def train_dataloader(self):
        h = self.hparams
        return DataLoader(Rows(h.shape, empty=h.empty), batch_size=h.batch_size,
                          collate_fn=collate_rec if h.shape == "rec" else None, drop_last=True)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


class RecTable(Table):
    def train_dataloader(self):
        return DataLoader(Rows("tuple"), batch_size=self.hparams.batch_size, collate_fn=collate_rec)


class Fixed(Table):
    """Its loader's batch is its own business: no batch_size anywhere Lightning looks."""

    def __init__(self, hidden=8):
        pl.LightningModule.__init__(self)
        self.net = nn.Sequential(nn.Linear(4, hidden), nn.ReLU(), nn.Linear(hidden, 3))

    def train_dataloader(self):
        return DataLoader(Rows("tuple"), batch_size=6)


class Tokens(Table):
    """Counts tokens as its samples, through the one hook."""

    def samples_in_batch(self, batch):
        return batch[0].numel()


class Data(pl.LightningDataModule):
    def __init__(self, shape="dict", batch_size=4, num_workers=0):
        super().__init__()
        self.shape, self.batch_size, self.num_workers = shape, batch_size, num_workers

    def train_dataloader(self):
        return DataLoader(Rows(self.shape), batch_size=self.batch_size, num_workers=self.num_workers)


class Needs(Table):
    def __init__(self, width, shape="tuple"):
        super().__init__(shape=shape, hidden=width)
'''


@pytest.fixture
def own(user_module):
    return user_module("ownwork", USER)


def _probe(cli, tmp_path, *argv):
    out = tmp_path / "out.json"
    code, _, err = cli("probe", *argv, *QUICK, "--no-tune", "--no-store", "--output", str(out))
    assert code == 0, err
    return parse_result(out.read_text())


@pytest.mark.parametrize("shape", ["tensor", "tuple", "list", "dict", "namedtuple"])
def test_batches_of_every_structure_reach_the_step_unchanged(cli, tmp_path, own, shape):
    r = _probe(cli, tmp_path, "--workload", "ownwork:Table", "--init-args", json.dumps({"shape": shape}))
    assert r.samples_per_sec > 0 and r.config.batch_size == 8 and r.shape.data_source == "module"


def test_a_dataclass_batch_and_a_datamodule_with_dict_batches(cli, tmp_path, own):
    r = _probe(cli, tmp_path, "--workload", "ownwork:RecTable")
    assert r.samples_per_sec > 0 and r.config.batch_size == 8
    r = _probe(cli, tmp_path, "--workload", "ownwork:Table", "--datamodule", "ownwork:Data",
               "--data-init-args", '{"batch_size": 5}')
    assert r.shape.data_source == "datamodule" and r.config.batch_size == 5  # the DataModule's batch_size


def test_a_batch_size_nobody_can_change_is_not_tunable(cli, tmp_path, own):
    out = tmp_path / "fixed.json"
    code, _, err = cli("probe", "--workload", "ownwork:Fixed", *QUICK, "--skip", "workers,compile,run_cpu,precision",
                       "--no-store", "--output", str(out))
    assert code == 0, err
    r = parse_result(out.read_text())
    batch = next(x for x in r.ladder if x.rung == "batch")
    assert batch.status == "not-applicable" and batch.error.startswith("not tunable: no batch_size")
    assert r.config.batch_size == 6 and not r.shape.batch_tunable and r.shape.memory.fixed_gib is None
    code, _, err = cli("probe", "--workload", "ownwork:Fixed", "--batch-size", "12", "--no-store")
    assert code == 2 and "cannot be changed" in err


def test_samples_are_counted_by_the_hook_when_there_is_one(cli, tmp_path, own):
    r = _probe(cli, tmp_path, "--workload", "ownwork:Tokens")
    assert r.shape.samples_counted_by == "hook"
    # 4 features per row counted as samples: samples/s is 4 rows/s per step time
    assert r.samples_per_sec == pytest.approx(4 * 8 / r.step_time.mean_s, rel=0.2)


def test_a_batch_size_rung_the_loader_ignores_is_not_applicable():
    from lightning_module.contract.ladder import RungError
    from lightning_module.run.measure import BatchCheck

    with pytest.raises(RungError, match="not tunable"):
        BatchCheck(16).on_train_batch_start(None, None, (torch.zeros(8, 2),), 0)


def test_first_tensor_leading_dim_and_setting_the_batch_size():
    Pair = namedtuple("Pair", "a b")

    @dataclasses.dataclass
    class Rec:
        meta: str
        x: torch.Tensor

    assert leading_dim({"ids": [("text", torch.zeros(7, 3))]}) == 7
    assert leading_dim(Pair("x", torch.zeros(5))) == 5 and leading_dim(Rec("m", torch.zeros(2, 2))) == 2
    assert first_tensor({"a": "b", "c": [1, 2]}) is None and leading_dim(torch.tensor(3.0)) is None

    class M:
        def __init__(self):
            self.batch_size, self.hparams = 4, {"batch_size": 4}

    m, dm = M(), type("D", (), {})()
    assert set_batch_size(m, dm, 32) and m.batch_size == 32 and m.hparams["batch_size"] == 32
    assert not set_batch_size(type("N", (), {})(), None, 8)


# --------------------------------------------------------------------------------------------
# Bad input: one line, exit 2


@pytest.mark.parametrize(("argv", "needle"), [
    (("--workload", "ownwork:Table", "--init-args", '{"empty": true}'), "yielded no batch: it is empty"),
    (("--workload", "ownwork:Table", "--init-args", '{"shape": "notensor"}'), "holds no tensor (it is a list of str)"),
    (("--workload", "ownwork:Table", "--init-args", '{"depth": 3}'), "takes no argument 'depth'"),
    (("--workload", "ownwork:Needs"), "needs 'width'"),
    (("--workload", "ownwork:Table", "--init-args", "{oops"), "--init-args: not valid JSON"),
    (("--workload", "ownwork:Table", "--init-args", "[1]"), "expected a JSON object"),
    (("--workload", "resnet18", "--init-args", '{"a": 1}'), "not the builtin resnet18"),
    (("--workload", "ownwork:Table", "--data-init-args", '{"a": 1}'), "need a DataModule"),
    (("--workload", "ownwork:Table", "--datamodule", "ownwork:Data", "--data-init-args", '{"rows": 1}'),
     "datamodule 'ownwork:Data' takes no argument 'rows'"),
    (("--config", "missing.yaml"), "--config missing.yaml does not exist"),
])
def test_bad_input_is_one_line_and_exit_2(cli, own, argv, needle):
    code, _, err = cli("probe", *argv, "--no-store")
    assert code == 2, err
    assert needle in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_config_that_does_not_match_the_constructor(cli, own, tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("model:\n  class_path: ownwork.Table\n  init_args:\n    widht: 3\n")
    code, _, err = cli("probe", "--config", str(cfg), "--no-store")
    assert code == 2 and "takes no argument 'widht'" in err and len(err.strip().splitlines()) == 1
    cfg.write_text("model:\n  class_path: ownwork.Table\noptimizer:\n  class_path: torch.optim.SGDD\n")
    code, _, err = cli("probe", "--config", str(cfg), "--no-store")
    assert code == 2 and "module torch.optim has no SGDD" in err and len(err.strip().splitlines()) == 1
    cfg.write_text("model: [unclosed\n")
    code, _, err = cli("probe", "--config", str(cfg), "--no-store")
    assert code == 2 and "not valid YAML" in err
    code, _, err = cli("probe", "--config", "examples/tabular.yaml", "--workload", "ownwork:Table", "--no-store")
    assert code == 2 and "disagree" in err


# --------------------------------------------------------------------------------------------
# The config reader and the id (no torch)


def test_lightning_cli_layouts(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text(textwrap.dedent("""
        fit:
          trainer: {max_epochs: 3}
          model:
            class_path: pkg.lm.TinyLM
            init_args: {d_model: 512, backbone: {class_path: pkg.nets.Enc, init_args: {depth: 2}}}
          data:
            class_path: pkg.data.Tokens
            init_args: {batch_size: 32, num_workers: 8}
    """))
    u = read_config(str(p))
    assert u.model == "pkg.lm:TinyLM" and u.datamodule == "pkg.data:Tokens"
    assert u.init_args["backbone"]["class_path"] == "pkg.nets.Enc"
    u = resolve(None, None, '{"d_model": 256}', None, str(p))
    assert u.init_args["d_model"] == 256 and u.batch_size == 32 and "batch_size" not in u.data_init_args
    p.write_text("model:\n  hidden: 3\n")  # LightningCLI(MyModel): the arguments themselves
    u = resolve("pkg.m:M", None, None, None, str(p))
    assert u.model == "pkg.m:M" and u.init_args == {"hidden": 3}
    with pytest.raises(WorkloadConfigError, match="not a LightningCLI config"):
        p.write_text("trainer: {}\n")
        read_config(str(p))
    j = tmp_path / "c.json"  # a JSON config reads without PyYAML
    j.write_text(json.dumps({"model": {"class_path": "pkg.m.M", "init_args": {"hidden": 3}}}))
    assert read_config(str(j)).init_args == {"hidden": 3}


def test_a_vit_keeps_its_own_image_size_unless_told(cli, tmp_path, own):
    # Table takes no image_size: the CLI's default is not forced on it, and an explicit one is refused.
    r = _probe(cli, tmp_path, "--workload", "ownwork:Table")
    assert r.workload.init_args == {} and r.workload.image_size == 224
    code, _, err = cli("probe", "--workload", "ownwork:Needs", "--init-args", '{"width": 4}', "--num-classes", "7", "--no-store")
    assert code == 2 and "takes no argument 'num_classes'" in err


def test_the_id_names_the_arguments_but_not_the_tuning():
    plain = WorkloadSpec(model="pkg.m:M")
    assert plain.workload_id == WorkloadSpec(model="pkg.m:M", init_args={"batch_size": 64}).workload_id
    # Without arguments the id is the one schema 1 gave: older results still match.
    import hashlib

    assert plain.workload_id == "custom-" + hashlib.sha256(b"pkg.m:M||224|1000").hexdigest()[:12]
    a = WorkloadSpec(model="pkg.m:M", init_args={"d": 1, "e": [1, 2]}).workload_id
    assert a != plain.workload_id and a == WorkloadSpec(model="pkg.m:M", init_args={"e": [1, 2], "d": 1}).workload_id
    with pytest.raises(ValueError, match="not a Python identifier"):
        WorkloadSpec(model="pkg.m:M", init_args={"not a name": 1})


# --------------------------------------------------------------------------------------------
# The shape in the result: schema 2, still reading schema 1


def test_schema_1_results_still_read_and_the_shape_is_bounded():
    from factories import probe_result

    d = json.loads(probe_result().model_dump_json())
    d["schema_version"] = 1
    d.pop("shape", None)
    old = ProbeResult.model_validate(d)
    assert old.schema_version == 1 and old.shape is None
    d["schema_version"] = RESULT_SCHEMA_VERSION + 1  # from an advisor newer than this one
    with pytest.raises(ValueError, match=f"schema_version {RESULT_SCHEMA_VERSION + 1} is not supported"):
        ProbeResult.model_validate(d)
    d["schema_version"] = 2
    for bad in ({"parameters": -1}, {"parameters": 10, "trainable_parameters": 11}, {"parameter_bytes": float("inf")},
                {"memory": {"where": "host", "points": [], "fixed_gib": 1.0}}):
        d["shape"] = {"data_source": "module", **bad}
        with pytest.raises(ValueError):
            ProbeResult.model_validate(d)


def test_a_schema_3_shape_reads_and_a_derived_fit_is_bounded():
    from factories import probe_result

    d = json.loads(probe_result().model_dump_json())
    d["schema_version"] = 3  # before MemoryFit.derived and memory_traffic_note
    d["shape"] = {"data_source": "module", "memory": {"where": "host", "points": [{"batch_size": 8, "peak_gib": 2.0},
                  {"batch_size": 16, "peak_gib": 3.0}], "fixed_gib": 1.0, "per_sample_gib": 0.125}}
    old = ProbeResult.model_validate(d)
    assert not old.shape.memory.derived and old.shape.memory_traffic_note is None
    assert old.shape.ops_per_step is None  # schema 5's op count: not counted then
    assert old.shape.memory.source_words() == "your probe's memory fit"
    fit = MemoryFit.derived_from("accelerator", 16, 10.0, 2.0, "state")
    assert fit.derived and fit.gib_at(16) == pytest.approx(10.0) and fit.per_sample_gib == pytest.approx(0.5)
    assert "derived" in fit.source_words() and "fixed = state" in fit.note
    over = MemoryFit.derived_from("host", 16, 1.0, 1.5, "state")  # fixed above the peak: all fixed
    assert over.fixed_gib == 1.0 and over.per_sample_gib == 0 and "above the peak" in over.note
    with pytest.raises(ValueError, match="exactly one point"):
        MemoryFit(where="host", points=[{"batch_size": 8, "peak_gib": 2.0}, {"batch_size": 16, "peak_gib": 3.0}],
                  fixed_gib=1.0, per_sample_gib=0.1, derived=True)


def test_recommend_prefers_a_fit_across_batches_to_a_derived_one():
    from factories import probe_result

    from lightning_module.contract.result import WorkloadShape
    from lightning_module.contract.workload_facts import facts_from_probes

    def with_fit(fit, source):
        shape = WorkloadShape(parameters=10, trainable_parameters=10, parameter_bytes=40.0, data_source="module",
                              memory=fit)
        return probe_result().model_copy(update={"shape": shape, "source": source})

    probe = with_fit(MemoryFit.fitted("accelerator", [(8, 6.0), (16, 10.0)]), "probe")
    run = with_fit(MemoryFit.derived_from("accelerator", 16, 12.0, 3.0, "state"), "training run")
    assert facts_from_probes("m", 224, [run, probe]).memory is probe.shape.memory  # the run is newer
    assert facts_from_probes("m", 224, [run]).memory is run.shape.memory  # alone, it is used


def test_the_memory_fit():
    fit = MemoryFit.fitted("accelerator", [(8, 2.0 + 8 * 0.5), (16, 2.0 + 16 * 0.5), (32, 2.0 + 32 * 0.5), (16, 9.0)])
    assert fit.fixed_gib == pytest.approx(2.0, abs=0.4) and fit.per_sample_gib == pytest.approx(0.5, abs=0.05)
    assert [p.batch_size for p in fit.points] == [8, 16, 32] and fit.points[1].peak_gib == 10.0  # the larger peak kept
    assert fit.largest_batch(fit.fixed_gib) == 0 and fit.largest_batch(24.0) >= 40
    flat = MemoryFit.fitted("host", [(8, 1.0), (16, 0.9)])
    assert flat.per_sample_gib == 0 and flat.fixed_gib == 1.0 and "did not grow" in flat.note
    one = MemoryFit.fitted("host", [(8, 1.0)])
    assert one.fixed_gib is None and one.gib_at(8) is None and one.largest_batch(4.0) is None


def test_the_traffic_counter_counts_what_ops_read_and_write_and_not_views():
    from lightning_module.run.counting import StepCounter

    a, b = torch.randn(4, 8), torch.randn(16, 8)
    with StepCounter() as t:
        bt = b.t()  # a view: nothing moves
        torch.mm(a, bt)  # reads 4x8 and 8x16, writes 4x16 float32
        a.relu()  # no FLOPs: its bytes are the bandwidth-bound share
    assert t.bytes == 4 * (32 + 128 + 64) + 4 * (32 + 32)
    assert t.matmul_bytes == 4 * (32 + 128 + 64) and t.other_bytes == 4 * (32 + 32)
    assert t.flops == 2 * 4 * 8 * 16


def test_a_grouped_convolutions_backward_counts_its_groups():
    """torch's own formula ignores `groups`: a depthwise backward read 65x its forward."""
    from lightning_module.run.counting import flop_counter

    x = torch.randn(2, 64, 16, 16, requires_grad=True)
    for conv in (torch.nn.Conv2d(64, 64, 3, padding=1, groups=64), torch.nn.Conv2d(64, 32, 3, padding=1)):
        with flop_counter() as fwd:
            conv(x)
        with flop_counter() as both:
            conv(x).sum().backward()
        assert both.get_total_flops() == 3 * fwd.get_total_flops()  # forward + input grad + weight grad


def test_traffic_per_sample_is_the_additional_samples_not_the_weights():
    from lightning_module.run.peaks import per_sample_traffic

    # 2 samples moved 10 MB, 4 moved 14 MB: 8 MB is the step's (weights), 2 MB each sample's.
    assert per_sample_traffic((2, 10e6), (4, 14e6)) == pytest.approx(2e6)
    assert per_sample_traffic((2, 10e6), None) == pytest.approx(5e6)  # one count: an upper bound
    assert per_sample_traffic((2, 10e6), (4, 9e6)) == pytest.approx(5e6)  # a count that fell: not trusted


def test_the_probe_counts_a_small_mlps_traffic_without_its_weights():
    from lightning_module.contract.result import WorkloadSpec
    from lightning_module.run.peaks import per_sample_counts

    spec = WorkloadSpec(model="mlp", image_size=32, num_classes=10, batch_size=8)
    batch = (torch.randint(0, 255, (8, 3, 32, 32), dtype=torch.uint8), torch.randint(0, 10, (8,)))
    flops, traffic, other, ops = per_sample_counts(spec, batch)
    # The first layer's weights (3072 x 64 fp32, ~0.8 MB) are read and their gradient written
    # every step: per sample the traffic is far below them.
    assert flops and traffic and traffic < 3072 * 64 * 4 / 2
    assert other and other < traffic  # the matmuls' bytes are not the bandwidth-bound share
    assert ops and ops > 0


def test_the_probe_counts_the_ops_a_step_dispatches_the_same_every_step(monkeypatch):
    """The host's share of a step on a GPU is one dispatch per op: counted per step, views aside,
    the same at the warm-up step, at 2 samples and at 4 (the count does not grow with the batch)."""
    from lightning_module.contract.result import WorkloadSpec
    from lightning_module.run import peaks

    seen = []

    class Kept(peaks._StepCounts):
        def __init__(self):
            super().__init__()
            seen.append(self)

    monkeypatch.setattr(peaks, "_StepCounts", Kept)
    spec = WorkloadSpec(model="mlp", image_size=32, num_classes=10, batch_size=8)
    batch = (torch.randint(0, 255, (8, 3, 32, 32), dtype=torch.uint8), torch.randint(0, 10, (8,)))
    *_, ops = peaks.per_sample_counts(spec, batch)
    per_step = [c[3] for c in seen[0].counts]
    assert len(per_step) == 3 and per_step[1] == per_step[2] == ops > 10
    with peaks.StepCounter() as t:
        a = torch.randn(4, 8)
        a.view(2, 16), a.t()  # views: no op dispatched to a kernel
        torch.mm(a, a.t())
    assert t.ops == 2  # randn and mm


def test_init_args_nested_past_the_stack_are_one_line_not_an_internal_error():
    from lightning_module.contract.workload_config import WorkloadConfigError, parse_init_args

    with pytest.raises(WorkloadConfigError, match="--init-args: JSON nested more than 64 levels"):
        parse_init_args("[" * 100_000 + "]" * 100_000, "--init-args")


def test_a_config_file_follows_the_one_text_rule(tmp_path):
    from lightning_module.contract.workload_config import WorkloadConfigError, read_config

    bom = tmp_path / "bom.json"
    bom.write_bytes("\ufeff".encode() + b'{"model": {"class_path": "ownwork.Table"}}')
    assert read_config(str(bom)).model == "ownwork:Table"  # a BOM is allowed
    utf16 = tmp_path / "u16.json"
    utf16.write_text('{"model": {"class_path": "ownwork.Table"}}', encoding="utf-16")
    with pytest.raises(WorkloadConfigError, match="not UTF-8 text"):
        read_config(str(utf16))


def test_reading_the_module_s_loader_on_a_gpu_machine_prints_no_lightning_warning(monkeypatch):
    # Seen on an H100: the preview's CPU Trainer said "GPU available but not used" in the probe's output.
    import warnings

    from lightning.pytorch.accelerators import CUDAAccelerator

    from lightning_module.run.preview import preview

    monkeypatch.setattr(CUDAAccelerator, "is_available", staticmethod(lambda: True))
    spec = WorkloadSpec(model="examples.tinylm:TinyLM", init_args=json.loads(TINY_LM))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        pv = preview(spec)
    assert pv.data_source == "module"
    assert not [w for w in seen if "GPU available" in str(w.message)]


class _Needs:
    def __init__(self, width, depth=2, *, colour):
        pass


@pytest.mark.parametrize("given, says", [
    ({}, "needs 'width', 'colour'"), ({"width": 1}, "needs 'colour'"), ({"width": 1, "colour": 2}, None),
    ({"width": 1, "colour": 2, "size": 3}, "takes no argument 'size' (its constructor takes: width, depth, colour)"),
])
def test_the_check_from_the_source_and_the_one_on_the_imported_class_say_the_same(given, says):
    """One rule (contract.workload_source.constructor_misfit) before the import and after it."""
    import ast
    import inspect

    from lightning_module.contract import workload_source
    from lightning_module.run.workloads import WorkloadError, check_args

    source = textwrap.dedent(inspect.getsource(_Needs))

    def said(check, error) -> str | None:
        try:
            check()
        except error as e:
            return str(e)
        return None

    before = said(lambda: workload_source._check_args(ast.parse(source).body[0], given, "workload", "m:M", ()),
                  workload_source.WorkloadSourceError)
    after = said(lambda: check_args(_Needs, given, "workload", "m:M"), WorkloadError)
    assert before == after
    assert (says is None and after is None) or says in after

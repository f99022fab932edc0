"""Multi-rank probes through the probe's own path: `advisor probe --devices 2 --strategy ddp` on two
CPU ranks (gloo), Lightning re-running the command once per extra rank; a rank that dies or hangs
ends the probe in one line, exit 1, nothing stored, no rank left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from lightning_module.contract.result import RESULT_SCHEMA_VERSION, parse_result
from lightning_module.run.readers import usable_cpus

pytestmark = pytest.mark.skipif(usable_cpus() < 2, reason="two CPU ranks need two usable cores")

ROOT = Path(__file__).resolve().parents[3]
QUICK = ("--accelerator", "cpu", "--devices", "2", "--strategy", "ddp", "--no-tune", "--max-seconds", "1",
         "--warmup-steps", "1", "--max-steps", "4", "--remeasure", "0")

FLAKY = '''
import os, time
import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Flaky(pl.LightningModule):
    """Rank 1 dies (exit 3) or hangs at its 3rd step; it writes its pid first."""

    def __init__(self, mode="die", pid_file="", batch_size=8):
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Linear(8, 2)
        self.seen = 0

    def training_step(self, batch, batch_idx):
        self.seen += 1
        if self.global_rank == 1 and self.seen == 3:
            with open(self.hparams.pid_file, "w") as f:
                f.write(str(os.getpid()))
            if self.hparams.mode == "die":
                os._exit(3)
            time.sleep(3600)
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self):
        return DataLoader(TensorDataset(torch.randn(4096, 8), torch.randint(0, 2, (4096,))),
                          batch_size=self.hparams.batch_size)
'''


def probe(tmp_path, *argv, timeout=300):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])}
    return subprocess.run([sys.executable, "-m", "advisor", "probe", *argv], check=False, capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=timeout)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_plain_ddp_on_two_cpu_ranks(tmp_path):
    out, db = tmp_path / "r.json", tmp_path / "r.db"
    done = probe(tmp_path, "--workload", "mlp", "--image-size", "16", "--batch-size", "16", *QUICK,
                 "--output", str(out), "--store", str(db))
    assert done.returncode == 0, done.stderr
    r = parse_result(out.read_text())
    assert r.config.devices == 2 and r.config.strategy == "ddp" and r.samples_per_sec > 0
    # Samples per step counted on rank 0's batches, times the two ranks.
    assert r.step_time.n_steps >= 1 and r.config.batch_size == 16
    assert done.stderr.count("probe: mlp") == 1  # rank 1 trained along, silently: only rank 0 reports


def test_fsdp_on_two_cpu_ranks_shards_the_layers_and_records_each_ranks_peak(tmp_path):
    out = tmp_path / "r.json"
    argv = [a if a != "ddp" else "fsdp" for a in QUICK]
    lm = '{"d_model": 16, "heads": 2, "layers": 2, "seq_len": 8, "vocab_size": 50}'
    done = probe(tmp_path, "--workload", "examples.tinylm:TinyLM", "--init-args", lm, *argv, "--output", str(out),
                 "--no-store")
    assert done.returncode == 0, done.stderr
    r = parse_result(out.read_text())
    assert r.config.devices == 2 and r.config.strategy == "fsdp" and r.samples_per_sec > 0
    assert len(r.rank_peak_memory_gib) == 2 and all(g > 0 for g in r.rank_peak_memory_gib)
    assert r.tokens_per_sec == pytest.approx(r.samples_per_sec * 8)


# The timeout covers rank 1's start (torch and Lightning import in it, 10-30 s on a loaded 2-core
# machine) as well as its steps: under it, a hang is found by the timeout, a death at once.
@pytest.mark.parametrize("mode, timeout, needle", [
    ("die", "120", "rank 1 exited with status 3"),
    ("hang", "45", "waited past --rank-timeout 45 s"),
])
def test_a_rank_that_dies_or_hangs_ends_the_probe_in_one_line(tmp_path, mode, timeout, needle):
    (tmp_path / "flaky.py").write_text(textwrap.dedent(FLAKY))
    pid_file, out, db = tmp_path / "rank1.pid", tmp_path / "r.json", tmp_path / "r.db"
    args = f'{{"mode": "{mode}", "pid_file": "{pid_file}"}}'
    done = probe(tmp_path, "--workload", "flaky:Flaky", "--init-args", args, *QUICK, "--rank-timeout", timeout,
                 "--output", str(out), "--store", str(db))
    assert done.returncode == 1, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("advisor: error: probe failed, nothing stored: multi-rank run failed:") and needle in last
    assert "Traceback" not in done.stderr
    assert not out.exists() and not db.exists()
    pid = int(pid_file.read_text())
    for _ in range(50):
        if not alive(pid):
            break
        time.sleep(0.1)
    assert not alive(pid), "the hung rank was left running"


def test_cpu_too_through_the_cli_with_a_cpu_standing_in_for_the_gpu(tmp_path, monkeypatch):
    from lightning_module.run.cpu_too import MAIN_DEVICE_ENV

    monkeypatch.setenv(MAIN_DEVICE_ENV, "cpu")  # the GPU + CPU path whole, on two CPU ranks
    out = tmp_path / "r.json"
    done = probe(tmp_path, "--workload", "mlp", "--image-size", "16", "--batch-size", "32", "--accelerator", "cpu",
                 "--no-tune", "--max-seconds", "1", "--warmup-steps", "1", "--max-steps", "4", "--remeasure", "0",
                 "--cpu-too", "--no-store", "--output", str(out))
    assert done.returncode == 0, done.stderr
    r = parse_result(out.read_text())
    g = r.gpu_and_cpu
    # + the after-backward twin
    assert g is not None and r.schema_version == RESULT_SCHEMA_VERSION and len(g.ranks) == 2 and 1 <= g.rounds <= 4 + 1
    assert sum(x.batch_size for x in g.ranks) > 32  # the CPU's share comes on top of the GPU's batch
    assert all(x.samples_per_sec_alone > 0 and x.busy_seconds > 0 for x in g.ranks)
    assert g.efficiency == pytest.approx(g.samples_per_sec / sum(x.samples_per_sec_alone for x in g.ranks))
    assert g.kept == (g.samples_per_sec_ci[0] > g.ranks[0].samples_per_sec_alone)
    assert "cpu too: alone" in done.stdout + done.stderr
    assert (done.stdout + done.stderr).count("probe: mlp") == 1  # the CPU rank trained along, silently
    # Each rank at its own precision (an fp32 pick: both fp32) and on its own cores, whole ones
    from lightning_module.contract import cores
    from lightning_module.run.readers import physical_cores

    assert [x.precision for x in g.ranks] == ["32-true", "32-true"] and g.precision == "32-true"
    assert [x.threads for x in g.ranks] == [c.threads for c in cores.gpu_and_cpu(physical_cores(), host_cpus=1)]


def test_the_cpu_rank_computes_in_bf16_only_where_its_cpu_has_it_natively():
    from lightning_module.run.cpu_too import cpu_precision

    assert cpu_precision("bf16-mixed", ["avx2", "avx512f", "avx512_bf16"]) == "bf16-mixed"
    assert cpu_precision("16-mixed", ["amx_bf16", "amx_tile"]) == "bf16-mixed"  # an fp16 GPU beside an AMX CPU
    assert cpu_precision("16-mixed", ["asimd", "bf16"]) == "bf16-mixed"  # Graviton3's Arm BF16
    assert cpu_precision("bf16-mixed", ["avx2", "fma", "avx512f"]) == "32-true"  # emulated bf16 is slower
    assert cpu_precision("32-true", ["avx512_bf16"]) == "32-true"  # the GPU won in fp32: so does the pair


def test_cpu_too_needs_a_gpu(cli, tmp_path):
    code, _, err = cli("probe", "--workload", "mlp", "--accelerator", "cpu", "--cpu-too", "--no-store")
    assert code == 2 and err.strip().count("\n") == 0 and "--cpu-too trains the CPU beside a GPU" in err

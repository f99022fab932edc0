"""Heterogeneous data-parallel training (run/hetero.py) on two CPU ranks, each with its own batch:
the weighted exchange gives the gradient of the concatenated batch, the balancer brings ranks of
unequal speed to within 10% of each other's step time; and the split rules (contract/balance.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch import nn

from lightning_module.contract import balance
from lightning_module.run.hetero import FORCE_MIXED_ENV
from lightning_module.run.readers import usable_cpus

ROOT = Path(__file__).resolve().parents[3]
two_ranks = pytest.mark.skipif(usable_cpus() < 2, reason="two CPU ranks need two usable cores")

GRADIENT = '''
import json, sys
import torch, lightning.pytorch as pl
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from lightning_module.run import hetero
from lightning_module.run.hetero import run_round

hetero.BUCKET_BYTES = 40  # the exchange in 2 buckets (12 + 84 B, then 28 + 140 B: backward order)
g = torch.Generator().manual_seed(1)
X, Y = torch.randn(8, 5, generator=g), torch.randint(0, 3, (8,), generator=g)
SHARES = [3, 5]


class M(pl.LightningModule):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3))

    def training_step(self, b, i):
        x, y = b
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.0)

    def on_before_optimizer_step(self, opt):  # after the exchange, before the update
        with open(f"{sys.argv[1]}.{self.global_rank}", "w") as f:
            json.dump([p.grad.reshape(-1).tolist() for p in self.parameters()], f)


def build(rank, batch):
    lo = sum(SHARES[:rank])
    ds = TensorDataset(X[lo:lo + batch], Y[lo:lo + batch])  # rank 0 rows 0-2, rank 1 rows 3-7
    m = M()
    m.train_dataloader = lambda: DataLoader(ds, batch_size=batch)
    return m, None


PRECISIONS = sys.argv[2].split(",") if len(sys.argv) > 2 else "32-true"
run_round(build, ["cpu", "cpu"], SHARES, [1, 1], steps=1, warmup=1, precision=PRECISIONS)  # 2 steps: the buckets start afresh
'''

BALANCE = '''
import json, sys, time
import torch, lightning.pytorch as pl
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from lightning_module.run.hetero import balance_run, this_rank

# rank 1 is three times slower per sample (or as argv[2] says): an artificial, load-proof delay
MS_PER_SAMPLE = [1.0, float(sys.argv[2]) if len(sys.argv) > 2 else 3.0]


class Slow(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(4, 2)

    def training_step(self, b, i):
        x, y = b
        time.sleep(MS_PER_SAMPLE[self.global_rank] * len(x) / 1000)
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def build(rank, batch):
    m = Slow()
    ds = TensorDataset(torch.randn(100000, 4), torch.randint(0, 2, (100000,)))
    m.train_dataloader = lambda: DataLoader(ds, batch_size=batch)
    return m, None


# Started from an equal split on purpose: the rates alone say nothing here.
out = balance_run(build, ["cpu", "cpu"], total=64, rates_alone=[MS_PER_SAMPLE[1], 1.0] if len(sys.argv) > 2
                  else [1.0, 1.0], threads=[1, 1], steps=6, warmup=1)
if this_rank() == 0:
    with open(sys.argv[1], "w") as f:
        json.dump({"dropped": out.dropped,
                   "rounds": [{"shares": r.shares, "busy_s": r.busy_s, "samples_per_sec": r.samples_per_sec,
                               "overlap": r.overlap} for r in out.rounds]}, f)
'''


AFTER_STEP = '''
import json, sys, time
import torch, lightning.pytorch as pl
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from lightning_module.run.hetero import run_round, this_rank


class Late(pl.LightningModule):
    """Rank 1 spends 0.4 s after each step's exchange (as a slow optimizer step would)."""

    def __init__(self):
        super().__init__()
        self.net = nn.Linear(4, 2)

    def training_step(self, b, i):
        return nn.functional.cross_entropy(self.net(b[0]), b[1])

    def on_train_batch_end(self, outputs, batch, batch_idx):
        if self.global_rank == 1:
            time.sleep(0.4)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def build(rank, batch):
    m = Late()
    ds = TensorDataset(torch.randn(1000, 4), torch.randint(0, 2, (1000,)))
    m.train_dataloader = lambda: DataLoader(ds, batch_size=batch)
    return m, None


r = run_round(build, ["cpu", "cpu"], [8, 8], [1, 1], steps=4, warmup=1)
if this_rank() == 0:
    with open(sys.argv[1], "w") as f:
        json.dump({"busy_s": r.busy_s, "compute_s": r.compute_s, "wait_s": r.wait_s, "step_s": r.step_s}, f)
'''


KINDS = '''
import json, sys, time
import torch, lightning.pytorch as pl
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from lightning_module.run.hetero import run_alone, run_round, this_rank

SEEN = []  # batches each Trainer trained
ENDS = []  # when the last Trainer's batches ended


class Counted(pl.LightningModule):
    def on_train_batch_end(self, outputs, batch, batch_idx):
        SEEN[-1] += 1
        ENDS.append(time.perf_counter())


class Plateau(Counted):
    """A ReduceLROnPlateau on val_loss: the probe runs no validation, so the metric never comes."""

    def __init__(self):
        super().__init__()
        self.net = nn.Linear(4, 2)

    def training_step(self, b, i):
        return nn.functional.cross_entropy(self.net(b[0]), b[1])

    def configure_optimizers(self):
        opt = torch.optim.SGD(self.parameters(), lr=0.01)
        sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "monitor": "val_loss"}}


class TwoOptimizers(Counted):
    """Manual optimization, two optimizers stepped every batch: the global step counts two per batch."""

    def __init__(self):
        super().__init__()
        self.automatic_optimization = False
        self.a, self.b = nn.Linear(4, 8), nn.Linear(8, 2)

    def training_step(self, batch, i):
        opts = self.optimizers()
        for o in opts:
            o.zero_grad()
        self.manual_backward(nn.functional.cross_entropy(self.b(self.a(batch[0]).relu()), batch[1]))
        for o in opts:
            o.step()

    def configure_optimizers(self):
        return [torch.optim.SGD(self.a.parameters(), lr=0.01), torch.optim.Adam(self.b.parameters(), lr=1e-3)]


class TwoLosses(TwoOptimizers):
    """A GAN's pattern: two losses a batch, each with its backward (an exchange each) and its step."""

    def training_step(self, batch, i):
        time.sleep(0.05)  # a step long enough that the clocks compared below are the steps'
        x, y = batch
        oa, ob = self.optimizers()
        oa.zero_grad()
        self.manual_backward(nn.functional.cross_entropy(self.b(self.a(x).relu()), y))
        oa.step()
        ob.zero_grad()
        self.manual_backward(nn.functional.cross_entropy(self.b(self.a(x).relu().detach()), y))
        ob.step()


def build(rank, batch):
    SEEN.append(0)
    ENDS.clear()
    m = {"plateau": Plateau, "two": TwoOptimizers, "losses": TwoLosses}[sys.argv[2]]()
    ds = TensorDataset(torch.randn(2 * batch, 4), torch.randint(0, 2, (2 * batch,)))  # an epoch is 2 batches
    m.train_dataloader = lambda: DataLoader(ds, batch_size=batch)
    return m, None


alone = run_alone(build, this_rank(), "cpu", 4, None, steps=3, warmup=1)
r = run_round(build, ["cpu", "cpu"], [3, 5], [1, 1], steps=3, warmup=1)
with open(f"{sys.argv[1]}.{this_rank()}", "w") as f:
    json.dump({"seen": SEEN, "alone": alone, "steps": r.steps, "rate": r.samples_per_sec, "ends": ENDS}, f)
'''


OVERFLOW = '''
import json, sys
import torch, lightning.pytorch as pl
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from lightning_module.run.hetero import run_round, this_rank

INF_AT = {0: 1, 1: 3}  # the batch at which each rank's gradients overflow (its loss times inf)


class M(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(4, 2)
        self.seen = []  # per batch: the weights after the step, this rank's loss scale (fp16)

    def training_step(self, b, i):
        loss = nn.functional.cross_entropy(self.net(b[0]), b[1])
        return loss * float("inf") if INF_AT[self.global_rank] == i else loss

    def on_train_batch_end(self, outputs, batch, batch_idx):
        scaler = getattr(self.trainer.precision_plugin, "scaler", None)
        self.seen.append([[p.detach().float().reshape(-1).tolist() for p in self.parameters()],
                          scaler.get_scale() if scaler is not None else None])

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def build(rank, batch):
    m = M()
    ds = TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
    m.train_dataloader = lambda: DataLoader(ds, batch_size=batch)
    build.module = m
    return m, None


run_round(build, ["cpu", "cpu"], [3, 5], [1, 1], steps=4, warmup=1, precision=["16-mixed", "bf16-mixed"])
with open(f"{sys.argv[1]}.{this_rank()}", "w") as f:
    json.dump(build.module.seen, f)
'''


SPARSE = '''
import json, sys
import torch, lightning.pytorch as pl
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from lightning_module.run.hetero import run_round

g = torch.Generator().manual_seed(1)
X, Y = torch.randint(0, 10, (8, 2), generator=g), torch.randint(0, 3, (8,), generator=g)
SHARES = [3, 5]


class Rec(pl.LightningModule):
    """The recommender's shape: a sparse embedding table with SparseAdam, an MLP with Adam, by hand."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.automatic_optimization = False
        self.emb, self.head = nn.Embedding(10, 4, sparse=True), nn.Linear(4, 3)

    def training_step(self, b, i):
        sparse, dense = self.optimizers()
        sparse.zero_grad()
        dense.zero_grad()
        self.manual_backward(nn.functional.cross_entropy(self.head(self.emb(b[0]).sum(1)), b[1]))
        if not hasattr(self, "dumped"):  # the first step's, after the exchange, before the update
            self.dumped = True
            with open(f"{sys.argv[1]}.{self.global_rank}", "w") as f:
                json.dump({"sparse": self.emb.weight.grad.is_sparse,
                           "grads": [p.grad.to_dense().reshape(-1).tolist() for p in self.parameters()]}, f)
        sparse.step()
        dense.step()

    def configure_optimizers(self):
        return [torch.optim.SparseAdam(self.emb.parameters(), lr=1e-3), torch.optim.Adam(self.head.parameters(), lr=1e-3)]


def build(rank, batch):
    lo = sum(SHARES[:rank])
    ds = TensorDataset(X[lo:lo + batch], Y[lo:lo + batch])
    m = Rec()
    m.train_dataloader = lambda: DataLoader(ds, batch_size=batch)
    return m, None


run_round(build, ["cpu", "cpu"], SHARES, [1, 1], steps=1, warmup=1)
'''


def run_script(tmp_path, text: str, out: Path, env_extra: dict | None = None, args: tuple = ()) -> None:
    script = tmp_path / "ranks.py"
    script.write_text(textwrap.dedent(text))
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env_extra or {})}
    done = subprocess.run([sys.executable, str(script), str(out), *args], check=False, capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]


@two_ranks
@pytest.mark.parametrize("mixed", [False, True], ids=["cpu-accelerator", "mixed-accelerator"])
def test_the_weighted_exchange_is_the_gradient_of_the_concatenated_batch(tmp_path, mixed):
    # mixed: the ranks' devices through MixedAccelerator, the GPU + CPU path, on two CPUs here
    out = tmp_path / "grad"
    run_script(tmp_path, GRADIENT, out, {FORCE_MIXED_ENV: "1"} if mixed else None)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(8, 5, generator=g), torch.randint(0, 3, (8,), generator=g)
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3))
    nn.functional.cross_entropy(net(x), y).backward()
    whole = torch.cat([p.grad.reshape(-1) for p in net.parameters()])
    for rank in (0, 1):
        got = torch.tensor([v for p in json.loads(Path(f"{out}.{rank}").read_text()) for v in p])
        assert torch.allclose(got, whole, atol=1e-6, rtol=1e-5), (rank, (got - whole).abs().max())

    # DDP's plain mean of the two ranks' gradients (batches of 3 and 5) is another vector: the test
    # tells the weighting from its absence.
    def grad_of(rows):
        net.zero_grad()
        nn.functional.cross_entropy(net(x[rows]), y[rows]).backward()
        return torch.cat([p.grad.reshape(-1) for p in net.parameters()])
    plain = (grad_of(slice(0, 3)) + grad_of(slice(3, 8))) / 2
    assert (plain - whole).abs().max() > 1e-3


@two_ranks
def test_a_sparse_gradient_is_exchanged_and_stays_sparse_for_sparse_adam(tmp_path):
    # The recommender example's tables (examples/recommender.py): SparseAdam takes sparse gradients only.
    out = tmp_path / "grad"
    run_script(tmp_path, SPARSE, out)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randint(0, 10, (8, 2), generator=g), torch.randint(0, 3, (8,), generator=g)
    torch.manual_seed(0)
    emb, head = nn.Embedding(10, 4, sparse=True), nn.Linear(4, 3)
    nn.functional.cross_entropy(head(emb(x).sum(1)), y).backward()
    whole = torch.cat([p.grad.to_dense().reshape(-1) for p in (emb.weight, head.weight, head.bias)])
    for rank in (0, 1):
        got = json.loads(Path(f"{out}.{rank}").read_text())
        assert got["sparse"] is True
        mine = torch.tensor([v for p in got["grads"] for v in p])
        assert torch.allclose(mine, whole, atol=1e-6, rtol=1e-5), (rank, (mine - whole).abs().max())


@two_ranks
def test_the_exchange_is_exact_at_each_ranks_own_precision_fp16_scaled_beside_bf16(tmp_path):
    # --cpu-too at an fp16 winner: the GPU rank in 16-mixed with its loss scaler (here on a CPU), the
    # CPU rank in bf16. The scale comes out before the exchange and goes back in after, so each
    # rank's optimizer gets the samples-weighted mean of the ranks' own gradients, exactly.
    out = tmp_path / "grad"
    run_script(tmp_path, GRADIENT, out, {FORCE_MIXED_ENV: "1"}, args=("16-mixed,bf16-mixed",))
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(8, 5, generator=g), torch.randint(0, 3, (8,), generator=g)
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3))

    def grad_of(rows, dtype, scale):
        net.zero_grad()
        with torch.autocast("cpu", dtype=dtype, enabled=dtype != torch.float32):
            loss = nn.functional.cross_entropy(net(x[rows]), y[rows])
        (loss * scale).backward()
        return torch.cat([p.grad.reshape(-1) for p in net.parameters()]) / scale

    fp16, bf16 = grad_of(slice(0, 3), torch.float16, 2.0**16), grad_of(slice(3, 8), torch.bfloat16, 1.0)
    want = (3 * fp16 + 5 * bf16) / 8  # GradScaler's first scale is 2**16
    for rank in (0, 1):
        got = torch.tensor([v for p in json.loads(Path(f"{out}.{rank}").read_text()) for v in p])
        assert torch.allclose(got, want, atol=1e-6, rtol=1e-5), (rank, (got - want).abs().max())
    whole32 = grad_of(slice(0, 8), torch.float32, 1.0)
    assert (want - whole32).abs().max() > 1e-5  # the precisions did change the gradient: a real check


@two_ranks
@pytest.mark.parametrize("kind", ["plateau", "two", "losses"])
def test_the_gpu_and_cpu_trainers_carry_the_probes_callbacks(tmp_path, kind):
    # plateau: its scheduler skips instead of failing the run (UnmonitoredSchedulers); two: stepping
    # two optimizers a batch, it still trains warm-up + timed batches, not half (BatchCap); losses:
    # two backward passes a batch, two exchanges, still one step (samples not counted twice).
    out = tmp_path / "kinds"
    run_script(tmp_path, KINDS, out, args=(kind,))
    for rank in (0, 1):
        got = json.loads(Path(f"{out}.{rank}").read_text())
        assert got["seen"] == [4, 4], got  # alone, then together: 1 warm-up + 3 timed batches each
        assert got["steps"] == 2 and got["alone"] > 0 and got["rate"] > 0, got  # 3 batch ends, 2 periods
        if kind == "losses":  # its steps are long enough (a 50 ms sleep) for two clocks to agree
            ends = got["ends"]  # the batches' own clock, together: 8 samples a batch
            assert got["rate"] == pytest.approx(8 * 2 / (ends[3] - ends[1]), rel=0.3), got


@two_ranks
def test_an_fp16_overflow_on_either_rank_skips_the_step_on_every_rank(tmp_path):
    # The fp16 rank (0, its loss scaler) overflows at batch 1, the bf16 rank (1) at batch 3: the sum
    # reaches both; the fp16 rank's scaler skips its step and halves its scale, the bf16 rank drops
    # its gradients and skips too, so the weights stay one model (not NaN on one rank, stale on the other).
    out = tmp_path / "overflow"
    run_script(tmp_path, OVERFLOW, out, {FORCE_MIXED_ENV: "1"})
    fp16, bf16 = (json.loads(Path(f"{out}.{r}").read_text()) for r in (0, 1))
    assert len(fp16) == len(bf16) == 5
    for b in range(5):
        w0, w1 = torch.tensor([v for p in fp16[b][0] for v in p]), torch.tensor([v for p in bf16[b][0] for v in p])
        assert torch.isfinite(w0).all() and torch.equal(w0, w1), (b, w0, w1)
    weights = [fp16[b][0] for b in range(5)]
    assert weights[1] == weights[0] and weights[3] == weights[2]  # the overflowed steps: skipped
    assert weights[2] != weights[1] and weights[4] != weights[3]  # the others: taken
    assert [s for _, s in fp16] == [2.0**16, 2.0**15, 2.0**15, 2.0**14, 2.0**14]  # GradScaler backs off
    assert all(s is None for _, s in bf16)


def test_the_round_kept_is_the_faster_of_the_balanced_split_and_its_after_backward_twin():
    from lightning_module.run.hetero import Balanced, Round

    def rnd(sps, overlap):
        return Round([48, 16], [0.1, 0.1], sps, 6, overlap=overlap)

    assert Balanced([rnd(90.0, True), rnd(100.0, True), rnd(120.0, False)]).final.overlap is False
    assert Balanced([rnd(90.0, True), rnd(130.0, True), rnd(120.0, False)]).final.samples_per_sec == 130
    assert Balanced([rnd(90.0, True), rnd(100.0, True)]).final.samples_per_sec == 100  # nothing compared


@two_ranks
def test_the_balancer_brings_unequal_ranks_within_ten_percent(tmp_path):
    out = tmp_path / "rounds.json"
    run_script(tmp_path, BALANCE, out)
    got = json.loads(out.read_text())
    rounds, twin = got["rounds"][:-1], got["rounds"][-1]
    assert got["dropped"] == [] and all(r["overlap"] for r in rounds)
    # the balanced split is run once more with the exchange after backward, the faster one kept
    assert not twin["overlap"] and twin["shares"] == rounds[-1]["shares"]
    first, last = rounds[0], rounds[-1]
    assert first["shares"] == [32, 32] and balance.imbalance(first["busy_s"]) > 0.5  # 3x slower: far apart
    assert balance.imbalance(last["busy_s"]) <= balance.BALANCED, rounds
    assert last["shares"][0] > 2 * last["shares"][1] and sum(last["shares"]) == 64  # about 48/16
    assert last["samples_per_sec"] > first["samples_per_sec"], rounds  # balanced is faster


@two_ranks
def test_a_ranks_work_after_the_exchange_is_its_own_busy_time_not_the_others(tmp_path):
    # Lightning's per-step SIGTERM broadcast would make rank 0 wait out rank 1's 0.4 s before every
    # step, and the balancer would read it as rank 0's work (both ranks equally slow, nothing to move).
    out = tmp_path / "round.json"
    run_script(tmp_path, AFTER_STEP, out)
    got = json.loads(out.read_text())
    assert got["busy_s"][1] >= 0.4 and got["busy_s"][0] < 0.2, got
    assert got["wait_s"][0] >= 0.3 > got["wait_s"][1], got  # rank 0 waits for it in the exchange instead
    assert all(0 <= c <= b for c, b in zip(got["compute_s"], got["busy_s"])), got


@two_ranks
def test_a_rank_whose_share_stays_tiny_is_dropped_after_one_round(tmp_path):
    # 30x slower per sample: its share of 64 is 3 (under 5%) at the start and 2 after re-balancing,
    # where the balancer would go on for MAX_ROUNDS rounds without converging.
    out = tmp_path / "rounds.json"
    run_script(tmp_path, BALANCE, out, args=("30",))
    got = json.loads(out.read_text())
    assert got["dropped"] == [1] and len(got["rounds"]) == 1, got
    assert got["rounds"][0]["shares"] == [61, 3]


def test_too_small_names_the_ranks_under_the_minimum_share():
    assert balance.too_small([61, 3]) == [1]  # 3 of 64 is 4.7%
    assert balance.too_small([60, 4]) == []  # 6.25%
    assert balance.too_small([4105, 11]) == [1]  # the H100's ResNet-18 split (docs/benchmarks.md)
    assert balance.too_small([256, 136]) == []


def test_split_is_proportional_whole_and_leaves_no_rank_empty():
    assert balance.split(64, [3.0, 1.0]) == [48, 16]
    assert balance.split(10, [1.0, 1.0, 1.0]) in ([4, 3, 3], [3, 4, 3], [3, 3, 4])
    assert balance.split(5, [1000.0, 1.0]) == [4, 1]  # the slow rank keeps one sample
    for total, rates in ((7, [0.3, 2.0]), (1000, [5.5, 1.25, 3.0]), (2, [1.0, 1e9])):
        s = balance.split(total, rates)
        assert sum(s) == total and min(s) >= 1
    with pytest.raises(ValueError):
        balance.split(1, [1.0, 1.0])
    with pytest.raises(ValueError):
        balance.split(8, [1.0, 0.0])


def test_rebalance_meets_at_equal_busy_times():
    # Rank 1 took 3x as long for the same share: its rate is a third of rank 0's.
    assert balance.rebalance([([32, 32], [0.032, 0.096])]) == [48, 16]
    assert balance.imbalance([0.05, 0.054]) == pytest.approx(0.08)
    assert balance.efficiency(900.0, [600.0, 400.0]) == pytest.approx(0.9)


def _rounds(rule, busy, shares: list[int], rounds: int = 4) -> list[float]:
    """The imbalance of each round when `rule` re-balances ranks whose busy times `busy(shares)` gives."""
    seen, history = [], []
    for _ in range(rounds):
        history.append((shares, busy(shares)))
        seen.append(balance.imbalance(history[-1][1]))
        if seen[-1] <= balance.BALANCED:
            break
        shares = rule(history)
    return seen


def test_rebalance_fits_each_ranks_fixed_cost_where_proportional_shares_keep_missing():
    # A GPU + CPU pair: the CPU rank's step has a fixed 0.5 s (its exchange, launch) besides 1/100 s
    # per sample; the GPU 0.02 s + 1/1000 s. Shares in proportion to the rates seen approach the
    # balance only slowly (every round re-reads a rate diluted by the fixed cost): 77%, 34%, 20%, 13%.
    def busy(s):
        return [0.02 + s[0] / 1000, 0.5 + s[1] / 100]

    def proportional(history):
        shares, busy_s = history[-1]  # each rank's rate seen: its share over its busy time
        return balance.split(sum(shares), [b / t for b, t in zip(shares, busy_s)])

    old = _rounds(proportional, busy, [600, 60])
    new = _rounds(balance.rebalance, busy, [600, 60])
    assert old[-1] > balance.BALANCED and len(old) == 4, old
    assert new[-1] <= balance.BALANCED and len(new) <= 3, new


def test_rebalance_holds_the_split_between_two_rounds_whose_slowest_rank_swapped():
    # Ranks that slow each other down (shared memory bandwidth) and a noisy round: rank 1 was the
    # slower at 20 samples and the faster at 40; whatever the lines say, the balance lies between.
    history = [([108, 20], [0.10, 0.30]), ([88, 40], [0.20, 0.05])]
    nxt = balance.rebalance(history)
    assert 20 <= nxt[1] <= 40 and sum(nxt) == 128, nxt
    # Shares closer than LINE_SPREAD give no slope: the latest round's rate, through the origin.
    assert balance.rebalance([([50, 50], [0.1, 0.3]), ([52, 48], [0.1, 0.3])]) == [76, 24]


def test_ranks_get_whole_cores_and_one_compute_thread_per_core():
    from lightning_module.contract import cores

    # 16 logical CPUs, 8 cores of two hyper-threads (CPU c and c+8 on one core, as Linux numbers them)
    ht = cores.by_core(list(range(16)), {c: (0, c % 8) for c in range(16)})
    assert ht[0] == [0, 8] and len(ht) == 8
    fast, slow = cores.split_by_speed(ht, [2, 1])
    assert (fast.threads, slow.threads) == (5, 3)
    assert fast.cpus == [0, 1, 2, 3, 4, 8, 9, 10, 11, 12] and slow.cpus == [5, 6, 7, 13, 14, 15]
    assert not set(fast.cpus) & set(slow.cpus)  # no core split between the ranks
    # --cpu-too: the GPU rank's main thread and 2 loader workers keep 2 whole cores (4 CPUs)
    gpu, cpu = cores.gpu_and_cpu(ht, host_cpus=3)
    assert gpu == cores.RankCores(cpus=[0, 1, 8, 9], threads=1)
    assert cpu.cpus == [2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15] and cpu.threads == 6
    # One thread per core (no hyper-threads): every CPU a core; a CPU without topology is its own
    flat = cores.by_core([0, 1, 2, 3], {0: (0, 0), 1: (0, 1), 2: (0, 2)})
    assert flat == [[0], [1], [2], [3]]
    assert [r.threads for r in cores.gpu_and_cpu(flat, 1)] == [1, 3]
    # Two sockets: cores of the same id on different packages are different cores
    two = cores.by_core([0, 1, 2, 3], {0: (0, 0), 1: (1, 0), 2: (0, 0), 3: (1, 0)})
    assert two == [[0, 2], [1, 3]]
    # Too small a machine to keep them apart: the CPU rank shares the last core (stated, not refused)
    assert cores.gpu_and_cpu([[0], [1]], host_cpus=3) == [cores.RankCores([0, 1], 1), cores.RankCores([1], 1)]


def test_the_machines_cores_are_read_from_linux_topology(tmp_path):
    from lightning_module.run.readers import physical_cores

    for c in os.sched_getaffinity(0):
        (tmp_path / f"cpu{c}" / "topology").mkdir(parents=True)
        (tmp_path / f"cpu{c}" / "topology" / "physical_package_id").write_text("0\n")
        (tmp_path / f"cpu{c}" / "topology" / "core_id").write_text("0\n")  # all siblings of one core
    assert physical_cores(str(tmp_path)) == [sorted(os.sched_getaffinity(0))]
    assert sum(map(len, physical_cores())) == usable_cpus()


def _both(**kw):
    from lightning_module.contract.result import GpuAndCpu, RankShare

    d = {"ranks": [RankShare(device="gpu", batch_size=256, threads=1, samples_per_sec_alone=1000.0, busy_seconds=0.25),
                    RankShare(device="cpu", batch_size=26, threads=14, samples_per_sec_alone=100.0, busy_seconds=0.24)],
             "samples_per_sec": 1050.0, "samples_per_sec_ci": (1020.0, 1080.0), "efficiency": 1050.0 / 1100.0, "rounds": 2,
             "kept": True}
    d.update(kw)
    return GpuAndCpu(**d)


def test_the_gpu_and_cpu_record_is_strict_and_says_what_it_means():
    from factories import probe_result
    from pydantic import ValidationError

    from lightning_module.contract.result import RESULT_SCHEMA_VERSION, ProbeResult, parse_result

    g = _both()
    assert g.gain == pytest.approx(0.05)
    for bad in ({"efficiency": 0.5},  # not together / sum alone
                {"samples_per_sec_ci": (990.0, 1080.0)},  # kept, but its CI reaches below the GPU alone
                {"samples_per_sec": float("nan")}, {"rounds": 0}, {"ranks": []}, {"kept": 1}):
        with pytest.raises(ValidationError):
            _both(**bad)
    r = probe_result().model_copy(update={"gpu_and_cpu": g})
    back = parse_result(r.model_dump_json())
    assert back.gpu_and_cpu == g and back.schema_version == RESULT_SCHEMA_VERSION
    # A version 2 result (no such field) reads as it is.
    old = json.loads(probe_result().model_dump_json())
    old["schema_version"] = 2
    del old["gpu_and_cpu"]
    assert parse_result(json.dumps(old)).gpu_and_cpu is None
    assert "gpu_and_cpu" in ProbeResult.model_fields


def test_results_show_says_what_the_cpu_added(cli, tmp_path):
    from factories import probe_result

    r = probe_result().model_copy(update={"gpu_and_cpu": _both()})
    f, db = tmp_path / "r.json", str(tmp_path / "r.db")
    f.write_text(r.model_dump_json())
    assert cli("results", "import", str(f), "--store", db)[0] == 0
    code, out, err = cli("results", "show", r.result_id, "--store", db)
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.startswith("cpu too"))
    assert "alone gpu 1,000.0 + cpu 100.0" in line and "together 1,050.0 samples/s" in line
    assert "+5.0%" in line and "efficiency 95%" in line and "batch gpu 256, cpu 26" in line and "kept" in line


@pytest.mark.parametrize(("together", "ci", "verdict"), [
    (414.3, (313.3, 611.3), "not kept: 58.6% slower than the gpu alone"),  # the H100 ResNet-18 run, per 1,000 of GPU alone
    (1010.0, (900.0, 1120.0), "not kept: no gain beyond the noise"),
])
def test_a_lost_cpu_too_says_it_was_slower_not_merely_no_gain(cli, tmp_path, together, ci, verdict):
    from factories import probe_result

    g = _both(samples_per_sec=together, samples_per_sec_ci=ci, efficiency=together / 1100.0, kept=False)
    r = probe_result().model_copy(update={"gpu_and_cpu": g})
    f, db = tmp_path / "r.json", str(tmp_path / "r.db")
    f.write_text(r.model_dump_json())
    assert cli("results", "import", str(f), "--store", db)[0] == 0
    out = cli("results", "show", r.result_id, "--store", db)[1]
    line = next(x for x in out.splitlines() if x.startswith("cpu too"))
    assert verdict in line, line

"""Heterogeneous data-parallel training: one rank on the GPU and one on the CPU (or any mix of
devices, two CPU ranks in the tests), each with its own batch size, in one Lightning Trainer per
process (the strategy below, launched by Lightning as DDP is: this command re-run per rank).

The gradient exchange is the strategy's own, overlapped with backward as DDP's is: each rank sends
its mean-loss gradient times its batch count in float32 buckets through the CPU (gloo, a backend
both devices can use) as backward makes them, then its count; every rank divides the sums by the
total count. So the update equals one step
on the concatenated batch, whatever the split (tests/packages/lightning_module/test_hetero.py).
The shares come from contract/balance.py: sized from each device's samples/s alone, re-balanced
from the busy times the ranks showed together.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

import lightning.pytorch as pl
import torch
import torch.distributed as dist
from lightning.pytorch.accelerators import Accelerator
from lightning.pytorch.plugins.precision import MixedPrecision, Precision

from ..contract import balance
from ..contract.ladder import CI_UNBOUNDED
from ..contract.options import RANK_TIMEOUT
from ..contract.timing import step_rate
from .batches import leading_dim
from .callbacks import BatchCap, UnmonitoredSchedulers
from .ranks import WatchedDDP, lost_rank

BUCKET_BYTES = 25 * 2**20  # fp32 gradients per exchange bucket (DDP's default bucket_cap_mb)
# Set: two CPU ranks go through MixedAccelerator too (the GPU + CPU path, tested without a GPU).
FORCE_MIXED_ENV = "ADVISOR_HETERO_MIXED"


class MixedAccelerator(Accelerator):
    """Lightning's accelerator is one kind for all ranks; here each rank sets up its own device."""

    def setup_device(self, device: torch.device) -> None:
        if device.type == "cuda":
            torch.cuda.set_device(device)

    def teardown(self) -> None:
        pass

    @staticmethod
    def parse_devices(devices):
        return devices

    @staticmethod
    def get_parallel_devices(devices):
        # Only a placeholder for Lightning's connector: the strategy names each rank's device.
        return [torch.device(d) for d in devices] if isinstance(devices, list) else [torch.device("cpu")] * devices

    @staticmethod
    def auto_device_count() -> int:
        return 1 + torch.cuda.device_count()

    @staticmethod
    def is_available() -> bool:
        return True

    @classmethod
    def name(cls) -> str:
        return "mixed"

    def get_device_stats(self, device):
        return {}


class HeteroDDP(WatchedDDP):
    """DDP's launch and process group, without DistributedDataParallel: the weighted exchange."""

    def __init__(self, devices: list[str], threads: list[int | None], rank_timeout_s: float = RANK_TIMEOUT,
                 mixed: bool = False, exchange: bool = True, overlap: bool = True, guard_inf: bool = False):
        # Mixed devices reach the strategy through MixedAccelerator (Lightning refuses a strategy's
        # devices of one kind beside an accelerator of another); one kind is given here.
        super().__init__(parallel_devices=None if mixed else [torch.device(d) for d in devices],
                         process_group_backend="gloo", timeout=timedelta(seconds=rank_timeout_s))
        self.threads = threads
        # False: each rank trains on its own at the same time, no gradients exchanged (the
        # benchmark's measure of what the ranks cost each other through the machine alone).
        self.exchange = exchange
        self.overlap = overlap  # False: every bucket sent after backward (the benchmark's comparison)
        # Some rank trains in fp16 with a loss scaler: an overflow there reaches every rank's sums, and
        # a rank without a scaler must then skip the step as the scaler does, or the weights part.
        self.guard_inf = guard_inf
        self.scale = 1.0  # this rank's loss scale this step (16-mixed), taken out before the exchange
        self.count = 0  # samples in this rank's current batch
        self.free_at: float | None = None  # when this rank left the last step's last exchange
        self.began = 0.0  # when this step's training_step began (its batch in hand)
        # A step is a batch, as the probe's timer counts: a module may call backward more than once
        # a batch (a GAN's two losses), an exchange each, so its exchanges are gathered (close_step).
        self.exchanges: list[tuple[float, float]] = []  # this step's: (entered, left)
        self.total = 0  # this step's samples, all ranks together
        self.busy_s: list[float] = []  # per step: leaving its last exchange to the next's, less the exchanges
        self.compute_s: list[float] = []  # of which forward and backward (training_step to the last exchange)
        self.wait_s: list[float] = []  # per step: in its exchanges (waiting for the others, their unhidden tail)
        self.exits: list[float] = []  # when each step's last exchange ended (the steps' clock, equal on all ranks)
        self.totals: list[int] = []  # samples of each step, all ranks together

    def setup_environment(self) -> None:
        super().setup_environment()
        n = self.threads[self.local_rank]
        if n:  # a CPU rank's compute threads; a GPU rank's host threads, left to the CPU rank
            torch.set_num_threads(n)

    def configure_ddp(self) -> None:
        # Every rank starts from rank 0's weights (through the CPU: gloo on any device's tensors).
        with torch.no_grad():
            for t in [*self.lightning_module.parameters(), *self.lightning_module.buffers()]:
                host = t.detach().to("cpu", copy=True)
                dist.broadcast(host, src=0)
                t.copy_(host.to(t.device))
        # DDP's overlap: the gradients in buckets, each sent as soon as backward has made all of
        # its gradients, while backward goes on with the layers before it (reverse order: the
        # order backward makes them; the same on every rank, which runs the same model).
        params = [p for p in self.lightning_module.parameters() if p.requires_grad]
        self.buckets: list[list[torch.nn.Parameter]] = [[]]
        size = 0
        for p in reversed(params):
            if size >= BUCKET_BYTES:
                self.buckets.append([])
                size = 0
            self.buckets[-1].append(p)
            size += p.numel() * 4
        self.bucket_of = {id(p): i for i, b in enumerate(self.buckets) for p in b}
        self.ready = [0] * len(self.buckets)
        self.sent: dict[int, tuple[torch.Tensor, object]] = {}
        if self.exchange and self.overlap:
            for p in params:
                p.register_post_accumulate_grad_hook(self._grad_ready)

    def _grad_ready(self, p: torch.Tensor) -> None:
        i = self.bucket_of[id(p)]
        self.ready[i] += 1
        if self.ready[i] == len(self.buckets[i]):
            self._send(i)

    def _send(self, i: int) -> None:
        """Bucket i's count x mean gradient, summed over ranks in the background (gloo's thread)."""
        flat = torch.cat([_dense(p).detach().reshape(-1).float()
                          for p in self.buckets[i]]).to("cpu").mul_(float(self.count) / self.scale)
        self.sent[i] = (flat, dist.all_reduce(flat, async_op=True))

    def training_step(self, *args, **kwargs):
        self.close_step()  # the previous batch's
        self.count = leading_dim(args[0]) or 0
        scaler = getattr(self.precision_plugin, "scaler", None)
        self.scale = float(scaler.get_scale()) if scaler is not None and scaler.is_enabled() else 1.0
        self.began = time.perf_counter()
        return super().training_step(*args, **kwargs)

    def post_backward(self, closure_loss) -> None:
        if self.root_device.type == "cuda":
            torch.cuda.synchronize(self.root_device)
        entered = time.perf_counter()
        if not self.exchange:
            self._left(entered, self.count)
            return
        for i in range(len(self.buckets)):  # a bucket with a parameter backward did not reach
            if i not in self.sent:
                self._send(i)
        counts = torch.tensor([float(self.count)])
        dist.all_reduce(counts)  # after every bucket, in the same order on every rank
        total = counts.item()
        finite = True
        for i, bucket in enumerate(self.buckets):
            flat, work = self.sent[i]
            work.wait()
            mean = flat.mul_(self.scale / total)  # the loss scale back in: the scaler unscales it
            finite = finite and (not self.guard_inf or bool(torch.isfinite(mean).all()))
            at = 0
            for p in bucket:
                g = mean[at:at + p.numel()].view_as(p).to(p.device, p.dtype)
                # A sparse gradient (nn.Embedding(sparse=True), for SparseAdam) goes back sparse:
                # the rows any rank touched.
                p.grad = g.to_sparse(p.grad.sparse_dim()) if p.grad is not None and p.grad.is_sparse else g
                at += p.numel()
        if not finite and getattr(self.precision_plugin, "scaler", None) is None:
            for bucket in self.buckets:  # the fp16 rank's scaler skips this step: so does this rank
                for p in bucket:
                    p.grad = None
        self.sent.clear()
        self.ready = [0] * len(self.buckets)
        self._left(entered, int(total))

    def _left(self, entered: float, total: int) -> None:
        self.exchanges.append((entered, time.perf_counter()))
        self.total = total

    def close_step(self) -> None:
        """The step's figures from its exchanges: it ended when its last exchange did."""
        if not self.exchanges:
            return
        waited = sum(left - entered for entered, left in self.exchanges)
        last_in, end = self.exchanges[-1]
        if self.free_at is not None:
            self.busy_s.append(end - self.free_at - waited)
            self.compute_s.append(last_in - self.began - (waited - (end - last_in)))
            self.wait_s.append(waited)
        self.free_at = end
        self.exits.append(end)
        self.totals.append(self.total)
        self.exchanges = []


def _dense(p: torch.Tensor) -> torch.Tensor:
    """A parameter's gradient as the exchange sends it: dense (zeros where backward did not reach it;
    a sparse one's whole table, which DDP would send as its rows: a large table costs the pair more here)."""
    if p.grad is None:
        return torch.zeros_like(p)
    return p.grad.to_dense() if p.grad.is_sparse else p.grad


@dataclass
class Round:
    """One run of a split: each rank's batch and median busy time, and the samples/s together.

    Where a step goes, per rank (medians over the timed steps): busy = compute (forward and
    backward) + the rest (optimizer step, the next batch); then wait, in the exchange: the slowest
    rank's wait is the exchange's tail that backward did not hide, a faster rank's adds the time it
    waited for the slowest (imbalance)."""

    shares: list[int]
    busy_s: list[float]
    samples_per_sec: float
    steps: int
    ci: tuple[float, float] = (0.0, 0.0)  # 95%, from the steps' periods (timing.step_rate)
    compute_s: list[float] = field(default_factory=list)
    wait_s: list[float] = field(default_factory=list)
    step_s: float = 0.0  # median period, one exchange's end to the next (equal on all ranks)
    rates: list[float] = field(default_factory=list)  # each rank's own samples/s (exchange=False: they differ)
    overlap: bool = True  # the exchange ran during backward (False: after it)

    @property
    def imbalance(self) -> float:
        return balance.imbalance(self.busy_s)


@dataclass
class Balanced:
    rounds: list[Round] = field(default_factory=list)
    dropped: list[int] = field(default_factory=list)  # ranks whose share stayed under balance.MIN_SHARE
    @property
    def compared(self) -> bool:
        """The last round is the balanced split again, with the exchange after backward."""
        return len(self.rounds) > 1 and not self.rounds[-1].overlap

    @property
    def final(self) -> Round:
        """The round kept: the balanced one, or its after-backward twin when that was faster."""
        if self.compared:
            return max(self.rounds[-2:], key=lambda r: r.samples_per_sec)
        return self.rounds[-1]


Builder = Callable[[int, int], tuple[pl.LightningModule, pl.LightningDataModule | None]]


def this_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", "0"))


def run_round(build: Builder, devices: list[str], shares: list[int], threads: list[int | None], steps: int,
              warmup: int = 2, precision: str | list[str] = "32-true", rank_timeout_s: float = RANK_TIMEOUT,
              exchange: bool = True, overlap: bool = True) -> Round:
    """Train `steps` timed steps (after `warmup`) with rank r on devices[r] at batch shares[r]; every
    rank returns the same Round. `build(rank, batch)` makes the module and DataModule of a rank;
    `precision` is every rank's, or each rank's (a list): a GPU in fp16 beside a CPU in bf16.
    exchange=False: the ranks train at the same time but each on its own (samples_per_sec is the
    sum of their own rates). overlap=False: the exchange starts after backward, not during it."""
    rank = this_rank()
    mixed = {torch.device(d).type for d in devices} != {"cpu"} or bool(os.environ.get(FORCE_MIXED_ENV))
    precisions = [precision] * len(devices) if isinstance(precision, str) else list(precision)
    strategy = HeteroDDP(devices, threads, rank_timeout_s, mixed=mixed, exchange=exchange, overlap=overlap,
                         guard_inf="16-mixed" in precisions)
    plugin = precision_plugin(precisions[rank], devices[rank])
    module, dm = build(rank, shares[rank])
    trainer = pl.Trainer(accelerator=MixedAccelerator() if mixed else "cpu", strategy=strategy,
                         devices=list(devices) if mixed else len(devices), plugins=[plugin],
                         max_steps=-1, max_epochs=-1, limit_val_batches=0, num_sanity_val_steps=0,
                         use_distributed_sampler=False, enable_checkpointing=False, logger=False,
                         enable_model_summary=False, enable_progress_bar=False,
                         callbacks=[UnmonitoredSchedulers(), BatchCap(warmup + steps)])
    # Lightning (2.6+) broadcasts rank 0's SIGTERM flag before every step: a second collective per
    # step that makes each rank wait for the slowest one's optimizer step and batch end, time the
    # balancer would read as the faster rank's own work; on a GPU rank it also round-trips a CUDA
    # tensor through the host. ranks.py already ends every rank when one is signalled or lost.
    epoch_loop = trainer.fit_loop.epoch_loop
    if hasattr(epoch_loop, "_broadcast_sigterm_tensor"):
        epoch_loop._broadcast_sigterm_tensor = lambda: None
    try:
        trainer.fit(module, datamodule=dm)
    except Exception as e:
        lost = lost_rank(e, rank_timeout_s)
        if lost is not None:
            raise lost from e
        raise
    strategy.close_step()  # the last batch's

    def median(xs: list[float]) -> float:
        timed = xs[warmup:] or xs
        return statistics.median(timed) if timed else 0.0

    periods = [b - a for a, b in zip(strategy.exits[warmup:], strategy.exits[warmup + 1:])]
    samples = strategy.totals[warmup + 1:]
    rate = sum(samples) / sum(periods) if periods else 0.0
    ci = (0.0, 0.0)
    if len(periods) >= 2:
        sr = step_rate(periods, statistics.fmean(samples))
        rate, ci = sr.samples_per_sec, (sr.ci_low, min(sr.ci_high, CI_UNBOUNDED))
    mine_ = (median(strategy.busy_s), median(strategy.compute_s), median(strategy.wait_s),
             statistics.median(periods) if periods else 0.0, rate, ci)
    every: list = [None] * len(devices)
    dist.all_gather_object(every, mine_)
    busy, compute, wait, step, rates, cis = (list(x) for x in zip(*every))
    if exchange:  # every rank timed the same steps: rank 0's figures are everyone's
        return Round(list(shares), busy, rates[0], len(periods), cis[0], compute, wait, step[0],
                     [rates[0] * b / sum(shares) for b in shares], overlap)
    return Round(list(shares), busy, sum(rates), len(periods), (sum(c[0] for c in cis), sum(c[1] for c in cis)),
                 compute, wait, max(step), rates, overlap)


def balance_run(build: Builder, devices: list[str], total: int, rates_alone: list[float],
                threads: list[int | None], steps: int, warmup: int = 2, precision: str | list[str] = "32-true",
                rank_timeout_s: float = RANK_TIMEOUT, max_rounds: int = balance.MAX_ROUNDS) -> Balanced:
    """Split `total` by the rates alone, then re-balance from the busy times of every round so far
    (balance.rebalance) until the ranks' step times are within balance.BALANCED of each other (or
    `max_rounds` ran); a rank whose share is
    under balance.MIN_SHARE before and after re-balancing is dropped (`dropped`) after one round."""
    out = Balanced()
    shares = balance.split(total, rates_alone)
    for _ in range(max_rounds):
        r = run_round(build, devices, shares, threads, steps, warmup, precision, rank_timeout_s)
        out.rounds.append(r)
        if r.imbalance <= balance.BALANCED:
            break
        nxt = balance.rebalance([(x.shares, x.busy_s) for x in out.rounds])
        small = sorted(set(balance.too_small(shares)) & set(balance.too_small(nxt)))
        if small:  # re-balancing a share this small cannot win: its fixed cost dominates
            out.dropped = small
            break
        if nxt == shares:
            break  # one sample either way is the finest step there is
        shares = nxt
    if not out.dropped and len(devices) > 1:
        # Overlap runs the exchange on a CPU backward also wants: where no hardware thread is
        # spare it can cost more than it hides, and which wins varies (two runs on one 16-vCPU
        # host, 1 thread per core: 1,724 overlapped vs 2,235 after backward, then 2,346 vs 2,085
        # samples/s). So the balanced split is also run with the exchange after backward and the
        # faster kept; every rank sees rank 0's figures, so all keep the same one.
        last = out.rounds[-1]
        out.rounds.append(run_round(build, devices, last.shares, threads, steps, warmup, precision, rank_timeout_s,
                                    overlap=False))
    return out


def precision_plugin(precision: str, device: str) -> Precision:
    """One rank's precision, for its own device (fp16 with its own loss scaler)."""
    kind = torch.device(device).type
    return MixedPrecision(precision, device=kind) if precision.endswith("-mixed") else Precision()


class _Clock(pl.Callback):
    """Step boundaries of a single-device run (the device synchronised first)."""

    def __init__(self):
        self.ends: list[float] = []
        self.samples: list[int] = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if pl_module.device.type == "cuda":
            torch.cuda.synchronize(pl_module.device)
        self.ends.append(time.perf_counter())
        self.samples.append(leading_dim(batch) or 0)


def run_alone(build: Builder, rank: int, device: str, batch: int, threads: int | None, steps: int,
              warmup: int = 2, precision: str = "32-true") -> float:
    """Samples/s of rank `rank`'s device training alone at `batch` (no process group): the rate its
    share is first sized from, and the 'alone' half of the combined efficiency."""
    dev = torch.device(device)
    if threads:
        torch.set_num_threads(threads)
    clock = _Clock()
    plugin = precision_plugin(precision, device)
    module, dm = build(rank, batch)
    trainer = pl.Trainer(accelerator="gpu" if dev.type == "cuda" else "cpu",
                         devices=[dev.index or 0] if dev.type == "cuda" else 1, plugins=[plugin],
                         max_steps=-1, max_epochs=-1, limit_val_batches=0, num_sanity_val_steps=0,
                         enable_checkpointing=False, logger=False, enable_model_summary=False,
                         enable_progress_bar=False, callbacks=[clock, UnmonitoredSchedulers(), BatchCap(warmup + steps)])
    trainer.fit(module, datamodule=dm)
    timed = range(max(warmup, 1), len(clock.ends))  # a step: one batch end to the next
    if not timed:
        raise RuntimeError("no steps were timed")
    return sum(clock.samples[i] for i in timed) / sum(clock.ends[i] - clock.ends[i - 1] for i in timed)

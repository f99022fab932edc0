"""Two devices training one model at once (article C): each alone, both together, the efficiency.

    python benchmarks/cpu_and_gpu.py               # two CPU ranks of unequal speed (any machine)
    python benchmarks/cpu_and_gpu.py --mode gpu    # GPU + CPU: ResNet-18 at 32 px, ResNet-50 at 224 px

Each case measures rank 0's device alone and rank 1's device alone (samples/s, in this process, no
process group), then both together through run/hetero.py: Lightning launches rank 1 by re-running
this command, the batch is split by the rates alone and re-balanced from the ranks' busy times
until they are within 10%, gradients are exchanged weighted by samples through the CPU (gloo).
Efficiency = together / (alone 0 + alone 1). Target for the CPU case: >= 85%.

CPU mode: on 3 or more usable cores the ranks get unequal thread counts (2/3 and 1/3 of the
cores); on 2 cores each gets one and rank 1 is slowed by an artificial delay (it sleeps as long
again as each step took, so it runs at half speed). Each rank is pinned (os.sched_setaffinity) to
its own CPUs, whole physical cores first, both alone and together, so that 'alone' does not borrow
the cores the other rank takes when together. GPU mode: the GPU rank keeps 2 host threads and
2 loader workers, the CPU rank trains on the other cores. It times things: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict, dataclass

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

PLAN_ENV = "CPU_AND_GPU_PLAN"  # rank 0's plan, read by the ranks Lightning re-runs this command as
TARGET = 0.85


@dataclass
class Case:
    name: str
    model: str
    image_size: int
    devices: list[str]
    threads: list[int]
    workers: list[int]
    slow: list[float]  # 1.0: full speed; 2.0: sleeps as long again as each step took
    batch_alone: list[int]
    precision: str
    rates_alone: list[float] | None = None
    total: int | None = None
    cores: list[list[int]] | None = None  # each rank's own CPUs, alone and together


def usable_cpus() -> int:
    return len(os.sched_getaffinity(0))


def disjoint_cores(threads: list[int]) -> list[list[int]]:
    """Each rank's CPUs, none shared, whole physical cores first (hyper-thread siblings kept
    together), so a rank alone runs on the very CPUs it has together: a fair 'alone'."""
    def core(c: int) -> tuple[int, int]:
        base = f"/sys/devices/system/cpu/cpu{c}/topology/"
        try:
            return (int(open(base + "physical_package_id").read()), int(open(base + "core_id").read()))
        except OSError:
            return (0, c)
    cpus = sorted(os.sched_getaffinity(0), key=lambda c: (core(c), c))
    out, at = [], 0
    for n in threads:
        out.append(cpus[at:at + n] or cpus[-1:])  # a GPU rank's host threads past the end share the last CPU
        at += n
    return out


def pin(cores: list[int], threads: int) -> None:
    import torch

    os.sched_setaffinity(0, cores)
    torch.set_num_threads(threads)


def cases(mode: str, precision: str | None) -> list[Case]:
    n = usable_cpus()
    if mode == "cpu":
        threads, slow = ([n - n // 3, n // 3], [1.0, 1.0]) if n >= 3 else ([1, 1], [1.0, 2.0])
        return [Case("two CPU ranks, ResNet-18 32 px", "resnet18", 32, ["cpu", "cpu"], threads, [0, 0], slow,
                     [256, 256], precision or "32-true")]
    cpu_threads = max(1, n - 4)  # the GPU rank's 2 host threads and 2 loader workers keep the rest
    p = precision or "bf16-mixed"
    return [
        Case("GPU + CPU, ResNet-18 32 px", "resnet18", 32, ["cuda:0", "cpu"], [2, cpu_threads], [2, 0], [1.0, 1.0],
             [4096, 64], p),
        Case("GPU + CPU, ResNet-50 224 px", "resnet50", 224, ["cuda:0", "cpu"], [2, cpu_threads], [2, 0], [1.0, 1.0],
             [256, 8], p),
    ]


def builder(case: Case):
    import time as _time

    from lightning_module.contract.result import WorkloadSpec
    from lightning_module.run.builders import ProbeModule
    from lightning_module.run.data import SyntheticDataModule
    from lightning_module.run.workloads import build_net

    spec = WorkloadSpec(model=case.model, image_size=case.image_size, num_classes=10)

    class Paced(ProbeModule):
        """Rank 1's artificial slowness: it sleeps (slow - 1) x the time each step took."""

        def __init__(self, net, slow: float):
            super().__init__(net)
            self.slow = slow
            self.began = 0.0

        def on_train_batch_start(self, batch, batch_idx):
            self.began = _time.perf_counter()

        def on_train_batch_end(self, outputs, batch, batch_idx):
            if self.slow > 1.0:
                _time.sleep((self.slow - 1.0) * (_time.perf_counter() - self.began))

    def build(rank: int, batch: int):
        import torch

        torch.manual_seed(0)
        dm = SyntheticDataModule(case.image_size, 10, batch, num_workers=case.workers[rank],
                                 pin_memory=case.devices[rank].startswith("cuda"), seed=rank)
        return Paced(build_net(spec), case.slow[rank]), dm

    return build


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("cpu", "gpu"), default="cpu")
    ap.add_argument("--precision", choices=("32-true", "bf16-mixed"),
                    help="both ranks' (default: 32-true on two CPU ranks, bf16-mixed with a GPU)")
    ap.add_argument("--alone-steps", type=int, default=6, help="timed steps of each device alone")
    ap.add_argument("--steps", type=int, default=8, help="timed steps of each balancing round")
    ap.add_argument("--batches", metavar="A,B", help="rank 0's and rank 1's batch alone, for every case "
                    "(default: CPU mode 256,256; GPU mode 4096,64 for ResNet-18 and 256,8 for ResNet-50)")
    args = ap.parse_args()

    from lightning_module.contract import balance
    from lightning_module.run import hetero
    from lightning_module.run.measure import quiet_lightning

    quiet_lightning()
    from lightning_module.run.cpu_too import MAIN_DEVICE_ENV, main_device

    rank = hetero.this_rank()
    if rank == 0:
        import torch

        if args.mode == "gpu" and not torch.cuda.is_available() and not os.environ.get(MAIN_DEVICE_ENV):
            print("cpu_and_gpu: --mode gpu needs a CUDA GPU; this machine has none (not run)", file=sys.stderr)
            return 2
        plan = cases(args.mode, args.precision)
        for c in plan:
            c.devices = [main_device() if d == "cuda:0" else d for d in c.devices]  # a stand-in, in a dry run
            if args.batches:
                c.batch_alone = [int(x) for x in args.batches.split(",")]
        print(f"machine: {usable_cpus()} usable CPU(s)"
              + (f", {torch.cuda.get_device_name(0)}" if args.mode == "gpu" and torch.cuda.is_available() else "")
              + f"; torch {torch.__version__}; {args.mode} mode", flush=True)
        everything = sorted(os.sched_getaffinity(0))
        for c in plan:  # every rate alone first: the other ranks are started once, with the whole plan
            build = builder(c)
            c.rates_alone = []
            c.cores = disjoint_cores(c.threads) if args.mode == "cpu" else None
            for r, dev in enumerate(c.devices):
                t0 = time.perf_counter()
                if c.cores:
                    pin(c.cores[r], c.threads[r])
                rate = hetero.run_alone(build, r, dev, c.batch_alone[r], c.threads[r], args.alone_steps,
                                        warmup=2, precision=c.precision)
                c.rates_alone.append(rate)
                print(f"{c.name}: rank {r} ({dev}, {c.threads[r]} thread(s), batch {c.batch_alone[r]}"
                      + (f", slowed x{c.slow[r]:g}" if c.slow[r] > 1 else "")
                      + (f", CPUs {','.join(map(str, c.cores[r]))}" if c.cores else "")
                      + f") alone: {rate:,.1f} samples/s ({time.perf_counter() - t0:.0f} s)", flush=True)
            os.sched_setaffinity(0, everything)  # rank 1 is launched from here: it pins itself below
            # Rank 0 keeps about its batch; the others get shares in proportion to their rates.
            c.total = round(c.batch_alone[0] * sum(c.rates_alone) / c.rates_alone[0])
        os.environ[PLAN_ENV] = json.dumps([asdict(c) for c in plan])
    else:
        plan = [Case(**d) for d in json.loads(os.environ[PLAN_ENV])]

    failed = False
    for c in plan:
        t0 = time.perf_counter()
        if c.cores:
            pin(c.cores[rank], c.threads[rank])
        out = hetero.balance_run(builder(c), c.devices, c.total, c.rates_alone, c.threads, args.steps,
                                 warmup=2, precision=c.precision)
        if rank != 0:
            continue
        for i, r in enumerate(out.rounds):
            busy = ", ".join(f"{b * 1000:.0f}" for b in r.busy_s)
            print(f"{c.name}: round {i + 1}: shares {r.shares}, busy ms/step [{busy}] "
                  f"(imbalance {r.imbalance:.0%}), together {r.samples_per_sec:,.1f} samples/s", flush=True)
        for i in out.dropped:
            print(f"{c.name}: rank {i} dropped: its share {out.final.shares[i]} is under "
                  f"{balance.MIN_SHARE:.0%} of the batch, where its fixed per-step cost dominates", flush=True)
        best = max(out.rounds, key=lambda r: r.samples_per_sec)
        eff = balance.efficiency(best.samples_per_sec, c.rates_alone)
        gain = best.samples_per_sec / max(c.rates_alone) - 1
        verdict = (f"target >= {TARGET:.0%}: {'met' if eff >= TARGET else 'missed'}" if args.mode == "cpu"
                   else f"{gain:+.1%} over the faster device alone")
        failed |= args.mode == "cpu" and eff < TARGET
        print(f"{c.name}: alone {' + '.join(f'{x:,.1f}' for x in c.rates_alone)} = {sum(c.rates_alone):,.1f}, "
              f"together {best.samples_per_sec:,.1f} samples/s (shares {best.shares}): efficiency {eff:.1%}; "
              f"{verdict} ({time.perf_counter() - t0:.0f} s)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

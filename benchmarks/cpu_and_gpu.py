"""Two devices training one model at once (article C): each alone, both together, the efficiency.

    python benchmarks/cpu_and_gpu.py               # two CPU ranks of unequal speed (any machine)
    python benchmarks/cpu_and_gpu.py --mode gpu    # GPU + CPU: ResNet-18 at 32 px, ResNet-50 at 224 px

Each case measures rank 0's device alone and rank 1's device alone (samples/s, in this process, no
process group), then both together through run/hetero.py: Lightning launches rank 1 by re-running
this command, the batch is split by the rates alone and re-balanced from the ranks' busy times
until they are within 10%, gradients are exchanged weighted by samples through the CPU (gloo).
Efficiency = together / (alone 0 + alone 1). Target for the CPU case: >= 85%.

CPU mode: on 3 or more physical cores the ranks get 2/3 and 1/3 of them; on 2 cores one each and
rank 1 is slowed by an artificial delay (it sleeps as long again as each step took). GPU mode: the
GPU rank keeps whole cores for its main thread and 2 loader workers, the CPU rank trains on the
rest. The cores are split by lightning_module/contract/cores.py, as `advisor probe --cpu-too` splits
them: whole physical cores per rank, one compute thread per core, every thread of a rank pinned to
its CPUs both alone and together (--no-pin: the same thread counts unpinned).

After balancing, the breakdown (--no-breakdown skips it) says where the efficiency went, as three
factors measured each on its own: each rank alone at its share together (smaller batches), both
ranks at once with no gradients exchanged (what they cost each other through the machine: memory
bandwidth, caches, clocks), and together (the exchange: its tail that backward did not hide, and
the imbalance); with every round's per-rank forward+backward, optimizer+batch and exchange times.
The last round is the balanced split again with the exchange after backward (hetero.balance_run
runs it, as --cpu-too does): 'together' is the faster of the two, what the overlap buys or costs.
It times things: run it on a quiet machine.
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
    precisions: list[str]  # each rank's
    cpus: list[list[int]] | None = None  # each rank's own CPUs, alone and together (None: unpinned)
    rates_alone: list[float] | None = None
    total: int | None = None


def cases(mode: str, precision: str | None, pinned: bool) -> list[Case]:
    from lightning_module.contract import cores
    from lightning_module.run.readers import physical_cores

    machine = physical_cores()
    if mode == "cpu":
        # 3+ cores: 2/3 and 1/3 of them; 2 cores: one each, rank 1 slowed x2 by its delay.
        split = cores.split_by_speed(machine, [2, 1]) if len(machine) >= 3 else cores.assign(machine, [1, 1])
        slow = [1.0, 1.0] if len(machine) >= 3 else [1.0, 2.0]
        return [Case("two CPU ranks, ResNet-18 32 px", "resnet18", 32, ["cpu", "cpu"], [r.threads for r in split],
                     [0, 0], slow, [256, 256], [precision or "32-true"] * 2, [r.cpus for r in split] if pinned else None)]
    split = cores.gpu_and_cpu(machine, host_cpus=1 + 2)  # the GPU rank's main thread and 2 loader workers
    from lightning_module.run.cpu_too import cpu_precision
    from lightning_module.run.hardware import parse_cpuinfo, read_cpuinfo

    gpu = precision or "bf16-mixed"  # the CPU rank as --cpu-too has it: bf16 only where native
    cpu = parse_cpuinfo(read_cpuinfo())
    p = [gpu, cpu_precision(gpu, cpu["isa_flags"], cpu["cpu_manufacturer"])]
    pins = [r.cpus for r in split] if pinned else None
    threads = [r.threads for r in split]
    return [
        Case("GPU + CPU, ResNet-18 32 px", "resnet18", 32, ["cuda:0", "cpu"], threads, [2, 0], [1.0, 1.0],
             [4096, 64], p, pins),
        Case("GPU + CPU, ResNet-50 224 px", "resnet50", 224, ["cuda:0", "cpu"], threads, [2, 0], [1.0, 1.0],
             [256, 8], p, pins),
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


def show_round(name: str, label: str, r) -> None:
    ms = lambda xs: "[" + ", ".join(f"{x * 1000:.0f}" for x in xs) + "]"
    other = [b - c for b, c in zip(r.busy_s, r.compute_s)]
    print(f"{name}: {label}: shares {r.shares}, per rank ms/step: forward+backward {ms(r.compute_s)}, "
          f"optimizer+batch {ms(other)}, in the exchange {ms(r.wait_s)}; step {r.step_s * 1000:.0f} ms "
          f"(imbalance {r.imbalance:.0%}); {r.samples_per_sec:,.1f} samples/s", flush=True)


def where_it_went(name: str, alone: list[float], at_shares: list[float], apart, together) -> None:
    """Efficiency = batch x machine x exchange: each factor one cause, measured on its own."""
    a, b, c, d = sum(alone), sum(at_shares), apart.samples_per_sec, together.samples_per_sec
    tail = min(together.wait_s)  # the slowest rank's time in the exchange: what backward did not hide
    wait = max(together.wait_s) - tail  # a faster rank's wait beyond that: the imbalance
    print(f"{name}: where the efficiency went ({d / a:.1%} = {b / a:.3f} x {c / b:.3f} x {d / c:.3f}):\n"
          f"  smaller batches: each rank alone at its share together, {' + '.join(f'{x:,.1f}' for x in at_shares)}"
          f" = {b:,.1f} ({b / a - 1:+.1%} against its batch alone)\n"
          f"  sharing the machine: both at once, no gradients exchanged, "
          f"{' + '.join(f'{x:,.1f}' for x in apart.rates)} = {c:,.1f} ({c / b - 1:+.1%}: memory bandwidth, caches, "
          f"clocks)\n"
          f"  the exchange: together {d:,.1f} ({d / c - 1:+.1%}); per step {together.step_s * 1000:.0f} ms, of which "
          f"{tail * 1000:.0f} ms exchange tail not hidden by backward and {wait * 1000:.0f} ms a faster rank waited "
          f"(imbalance)", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("cpu", "gpu"), default="cpu")
    ap.add_argument("--precision", choices=("32-true", "bf16-mixed", "16-mixed"),
                    help="CPU mode: both ranks'; GPU mode: the GPU rank's, the CPU rank then in bf16 where its CPU "
                    "has it natively, else fp32, as --cpu-too does (default: 32-true on two CPU ranks, bf16-mixed "
                    "with a GPU)")
    ap.add_argument("--alone-steps", type=int, default=6, help="timed steps of each device alone")
    ap.add_argument("--steps", type=int, default=8, help="timed steps of each balancing round")
    ap.add_argument("--batches", metavar="A,B", help="rank 0's and rank 1's batch alone, for every case "
                    "(default: CPU mode 256,256; GPU mode 4096,64 for ResNet-18 and 256,8 for ResNet-50)")
    ap.add_argument("--no-pin", action="store_true", help="leave the ranks unpinned (same thread counts): what "
                    "pinning to whole cores buys")
    ap.add_argument("--no-breakdown", action="store_true", help="skip the diagnostic runs after balancing (each "
                    "alone at its share, both at once without exchange, the exchange after backward)")
    args = ap.parse_args()

    from lightning_module.contract import balance
    from lightning_module.run import hetero
    from lightning_module.run.measure import quiet_lightning
    from lightning_module.run.readers import physical_cores, pin

    quiet_lightning()
    from lightning_module.run.cpu_too import MAIN_DEVICE_ENV, main_device

    rank = hetero.this_rank()
    everything = sorted(os.sched_getaffinity(0))
    if rank == 0:
        import torch

        if args.mode == "gpu" and not torch.cuda.is_available() and not os.environ.get(MAIN_DEVICE_ENV):
            print("cpu_and_gpu: --mode gpu needs a CUDA GPU; this machine has none (not run)", file=sys.stderr)
            return 2
        plan = cases(args.mode, args.precision, pinned=not args.no_pin)
        for c in plan:
            c.devices = [main_device() if d == "cuda:0" else d for d in c.devices]  # a stand-in, in a dry run
            if args.batches:
                c.batch_alone = [int(x) for x in args.batches.split(",")]
        machine = physical_cores()
        print(f"machine: {len(everything)} usable CPU(s) in {len(machine)} physical core(s)"
              + (f", {torch.cuda.get_device_name(0)}" if args.mode == "gpu" and torch.cuda.is_available() else "")
              + f"; torch {torch.__version__}; {args.mode} mode; {'unpinned' if args.no_pin else 'pinned'}", flush=True)
        for c in plan:  # every rate alone first: the other ranks are started once, with the whole plan
            build = builder(c)
            c.rates_alone = []
            for r, dev in enumerate(c.devices):
                t0 = time.perf_counter()
                pin(c.cpus[r] if c.cpus else everything)
                rate = hetero.run_alone(build, r, dev, c.batch_alone[r], c.threads[r], args.alone_steps,
                                        warmup=2, precision=c.precisions[r])
                c.rates_alone.append(rate)
                print(f"{c.name}: rank {r} ({dev}, {c.precisions[r]}, {c.threads[r]} thread(s), batch {c.batch_alone[r]}"
                      + (f", slowed x{c.slow[r]:g}" if c.slow[r] > 1 else "")
                      + (f", CPUs {','.join(map(str, c.cpus[r]))}" if c.cpus else "")
                      + f") alone: {rate:,.1f} samples/s ({time.perf_counter() - t0:.0f} s)", flush=True)
            # Rank 0 keeps about its batch; the others get shares in proportion to their rates.
            c.total = round(c.batch_alone[0] * sum(c.rates_alone) / c.rates_alone[0])
        pin(everything)  # rank 1 is launched from here: it pins itself below
        os.environ[PLAN_ENV] = json.dumps([asdict(c) for c in plan])
    else:
        plan = [Case(**d) for d in json.loads(os.environ[PLAN_ENV])]

    failed = False
    for c in plan:
        t0 = time.perf_counter()
        pin(c.cpus[rank] if c.cpus else everything)
        out = hetero.balance_run(builder(c), c.devices, c.total, c.rates_alone, c.threads, args.steps,
                                 warmup=2, precision=c.precisions)
        best = out.final  # the balanced split, overlapped or after backward, whichever was faster
        diagnose = not args.no_breakdown and not out.dropped
        if diagnose:  # every rank runs this: both at once without exchange
            apart = hetero.run_round(builder(c), c.devices, best.shares, c.threads, args.steps, 2, c.precisions,
                                     exchange=False)
        if rank != 0:
            continue
        for i, r in enumerate(out.rounds):
            show_round(c.name, f"round {i + 1}" + ("" if r.overlap else ", exchange after backward"), r)
        for i in out.dropped:
            print(f"{c.name}: rank {i} dropped: its share {out.final.shares[i]} is under "
                  f"{balance.MIN_SHARE:.0%} of the batch, where its fixed per-step cost dominates", flush=True)
        eff = balance.efficiency(best.samples_per_sec, c.rates_alone)
        gain = best.samples_per_sec / max(c.rates_alone) - 1
        verdict = (f"target >= {TARGET:.0%}: {'met' if eff >= TARGET else 'missed'}" if args.mode == "cpu"
                   else f"{gain:+.1%} over the faster device alone")
        failed |= args.mode == "cpu" and eff < TARGET
        print(f"{c.name}: alone {' + '.join(f'{x:,.1f}' for x in c.rates_alone)} = {sum(c.rates_alone):,.1f}, "
              f"together {best.samples_per_sec:,.1f} samples/s (shares {best.shares}): efficiency {eff:.1%}; "
              f"{verdict} ({time.perf_counter() - t0:.0f} s)", flush=True)
        if diagnose:
            show_round(c.name, "both at once, no exchange", apart)
            at_shares = []
            for r, dev in enumerate(c.devices):  # rank 1 waits (the next case, or exits): each alone at its share
                pin(c.cpus[r] if c.cpus else everything)
                at_shares.append(hetero.run_alone(builder(c), r, dev, best.shares[r], c.threads[r], args.alone_steps,
                                                  warmup=2, precision=c.precisions[r]))
            pin(everything)
            where_it_went(c.name, c.rates_alone, at_shares, apart, best)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

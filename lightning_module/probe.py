"""Run the probe: train one workload with Lightning, measure it, tune it up the ladder.

`ProbeModule` is the whole training step for the builtin workloads (SGD + cross-entropy, as in
the articles); `measure()` runs one configuration in a Trainer with the StepTimer callback;
`run_probe()` climbs the ladder and assembles the ProbeResult.
"""

from __future__ import annotations

import gc
import logging
import math
import os
import resource
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

import lightning.pytorch as pl
import torch
from torch import nn

from . import hardware, workloads
from .data import SyntheticDataModule, normalise
from .ladder import CompileTimeout, LadderOptions, Measurement, RungTooSlow, run_ladder
from .result import ProbeConfig, ProbeResult, RungResult, WorkloadSpec
from .timing import make_callback, step_stats, throughput
from .workloads import WorkloadError

log = logging.getLogger(__name__)

DEFAULT_LR = 0.01
# A step this many times slower than the best configuration's (per sample) cannot win: cut the rung
# short. Only for steps of more than MIN_SLOW_STEP_S, where waiting costs real time and one
# scheduler hiccup cannot trigger it.
SLOW_FACTOR = 3.0
MIN_SLOW_STEP_S = 2.0


class ProbeModule(pl.LightningModule):
    """A builtin network trained the articles' way: SGD, cross-entropy, images normalised on the device."""

    def __init__(self, net: nn.Module, channels_last: bool = False, ipex_dtype: torch.dtype | None = None):
        super().__init__()
        self.net = net
        self.loss_fn = nn.CrossEntropyLoss()
        self.channels_last = channels_last
        self.ipex_dtype = ipex_dtype

    def forward(self, x):
        return self.net(x)

    def on_after_batch_transfer(self, batch, dataloader_idx):
        x, y = batch
        return normalise(x, self.channels_last), y

    def training_step(self, batch, batch_idx):
        x, y = batch
        return self.loss_fn(self(x), y)

    def configure_optimizers(self):
        opt = torch.optim.SGD(self.parameters(), lr=DEFAULT_LR)
        if self.ipex_dtype is not None:
            import intel_extension_for_pytorch as ipex

            self.net, opt = ipex.optimize(self.net, optimizer=opt, dtype=self.ipex_dtype)
        return opt


def _patch_user_module(module: pl.LightningModule, channels_last: bool) -> None:
    """A user's module fed by the synthetic data gets uint8 images: normalise them first."""
    original = module.on_after_batch_transfer

    def on_after_batch_transfer(batch, dataloader_idx):
        x, y = batch
        return original((normalise(x, channels_last), y), dataloader_idx)

    module.on_after_batch_transfer = on_after_batch_transfer


# ---------------------------------------------------------------------------------------------
# The device


class NotAvailable(WorkloadError):
    """The requested accelerator is not on this machine."""


def xla_available() -> bool:
    try:
        import torch_xla  # noqa: F401
    except ImportError:
        return False
    return True


def resolve_accelerator(requested: str) -> str:
    if requested == "auto":
        if torch.cuda.is_available():
            return "gpu"
        if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return "mps"
        if xla_available() and os.environ.get("PJRT_DEVICE"):
            return "tpu"
        return "cpu"
    if requested in ("gpu", "cuda"):
        if not torch.cuda.is_available():
            raise NotAvailable("accelerator gpu is not available here: torch sees no CUDA device")
        return "gpu"
    if requested == "mps":
        if not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
            raise NotAvailable("accelerator mps is not available here: torch sees no Apple GPU")
        return "mps"
    if requested in ("tpu", "xla"):
        if not xla_available():
            raise NotAvailable("accelerator tpu (XLA) is not available here: torch_xla is not installed")
        return "tpu"
    if requested == "cpu":
        return "cpu"
    raise WorkloadError(f"unknown accelerator {requested!r}: use auto, cpu, gpu, mps or tpu")


def default_devices(accelerator: str, hw) -> tuple[int, str]:
    """All accelerators; on a CPU with several NUMA nodes, one rank per node (DDP)."""
    if accelerator == "gpu":
        n = torch.cuda.device_count()
        return n, "auto"
    if accelerator == "cpu" and (hw.numa_nodes or 1) > 1:
        return hw.numa_nodes, "ddp"
    return 1, "auto"


def half_precision(accelerator: str) -> str | None:
    """bf16 where the device computes it natively, else fp16 (T4, V100, Apple GPUs)."""
    if accelerator == "gpu":
        major, _ = torch.cuda.get_device_capability(0)
        return "bf16-mixed" if major >= 8 else "16-mixed"
    if accelerator == "mps":
        return "16-mixed"
    return "bf16-mixed"


def ipex_missing() -> str | None:
    """None when Intel Extension for PyTorch imports and matches torch; else why not."""
    try:
        import intel_extension_for_pytorch as ipex
    except Exception as e:  # noqa: BLE001
        return f"intel_extension_for_pytorch is not installed ({type(e).__name__})"
    want = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    have = ".".join(str(getattr(ipex, "__version__", "")).split("+")[0].split(".")[:2])
    if want != have:
        return f"intel_extension_for_pytorch {have} does not match torch {want}"
    return None


def worker_counts() -> tuple[int, ...]:
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    out, n = [], 2
    while n <= cores:
        out.append(n)
        n *= 2
    return tuple(out)


def _free_memory(accelerator: str) -> None:
    gc.collect()
    if accelerator == "gpu":
        torch.cuda.empty_cache()


# ---------------------------------------------------------------------------------------------
# One configuration


@dataclass
class MeasureSettings:
    spec: WorkloadSpec
    warmup_steps: int = 3
    target_ci: float = 0.03
    max_seconds: float = 60.0
    max_steps: int | None = None
    compile_timeout: float = 300.0
    progress_bar: bool = False
    seed: int = 0


def build_module(spec: WorkloadSpec, config: ProbeConfig, synthetic: bool) -> pl.LightningModule:
    channels_last = config.channels_last
    if workloads.is_builtin(spec):
        ipex_dtype = None
        if config.ipex:
            ipex_dtype = torch.bfloat16 if config.precision == "bf16-mixed" else torch.float32
        module = ProbeModule(workloads.build_net(spec), channels_last=channels_last, ipex_dtype=ipex_dtype)
    else:
        module = workloads.build_user_module(spec, config.batch_size)
        if synthetic:
            _patch_user_module(module, channels_last)
    if channels_last:
        module = module.to(memory_format=torch.channels_last)
    return module


def build_datamodule(spec: WorkloadSpec, config: ProbeConfig, seed: int = 0):
    if spec.datamodule:
        return workloads.build_user_datamodule(spec, config.batch_size, config.num_workers, config.pin_memory)
    return SyntheticDataModule(
        spec.image_size, spec.num_classes, config.batch_size,
        num_workers=config.num_workers, pin_memory=config.pin_memory, seed=seed,
    )


def measure(settings: MeasureSettings, config: ProbeConfig, extra_callbacks=(),
            max_steps: int | None = None, slow_step_s: float | None = None) -> Measurement:
    """Train `config` until the stopping rule says the throughput is known; raise on failure."""
    spec = settings.spec
    _free_memory(config.accelerator)
    if config.accelerator == "gpu":
        torch.cuda.reset_peak_memory_stats()
    else:
        reset_peak_rss()
    torch.manual_seed(settings.seed)
    synthetic = not spec.datamodule
    module = build_module(spec, config, synthetic)
    dm = build_datamodule(spec, config, settings.seed)
    warmup = settings.warmup_steps + (1 if config.compile else 0)  # the compile step comes on top
    first_limit = step_limit = None
    # Each rank's alarm fires on its own clock, and a rank that leaves a step while the others wait
    # for it in an all-reduce hangs them all (and mismatches the next rung's collectives): with
    # several ranks, compilation and slow steps are not cut short.
    single_rank = config.devices * config.num_nodes == 1
    if config.compile and single_rank:
        first_limit = (settings.compile_timeout,
                       CompileTimeout(f"torch.compile took longer than --compile-timeout {settings.compile_timeout:g} s"))
    if slow_step_s is not None and single_rank:
        step_limit = (slow_step_s, RungTooSlow(
            f"a step took over {slow_step_s:.1f} s, {SLOW_FACTOR:g}x the best so far: stopped, it cannot win"))
        if first_limit is None:
            # The first step carries the rung's set-up (new loader workers, lazy init, kernels for a
            # new memory format) and is warm-up, not timed: under load it crossed a 2 s limit that
            # the steady steps kept. Bound it, more loosely.
            first_limit = (SLOW_FACTOR * slow_step_s, step_limit[1])
    timer = make_callback(config.accelerator, warmup, settings.target_ci, settings.max_seconds,
                          max_steps=settings.max_steps, first_step_limit=first_limit, step_limit=step_limit)
    cap = max_steps if max_steps is not None else (warmup + settings.max_steps if settings.max_steps else -1)
    trainer = pl.Trainer(
        accelerator=config.accelerator, devices=config.devices, num_nodes=config.num_nodes,
        strategy=config.strategy, precision=config.precision,
        max_epochs=-1, max_steps=cap, limit_val_batches=0, num_sanity_val_steps=0,
        enable_checkpointing=False, logger=False, enable_model_summary=False,
        enable_progress_bar=settings.progress_bar, callbacks=[timer, *extra_callbacks],
    )
    if config.compile:
        module = torch.compile(module)
    try:
        trainer.fit(module, datamodule=dm)
    finally:
        timer.alarm.disarm()
        del trainer, module, dm
    t = timer.timing
    if len(t.step_times) < 1:
        raise RuntimeError("no steps were timed (the data ran out during warm-up?)")
    world = config.devices * config.num_nodes
    tp = throughput(t.step_times, config.batch_size * world)
    if config.accelerator == "gpu":
        peak = torch.cuda.max_memory_allocated() / 2**30
    else:
        peak = peak_rss_gib()
    compile_s = None
    if config.compile and t.first_step_seconds is not None:
        # The first step minus an ordinary step is the compiler's share.
        compile_s = max(0.0, t.first_step_seconds - sum(t.step_times) / len(t.step_times))
    # An unbounded CI (one timed step) is inf, which JSON writes as null and the result then
    # fails to read back: a finite stand-in far above any throughput keeps the record valid.
    return Measurement(
        samples_per_sec=tp.samples_per_sec, ci_low=tp.ci_low, ci_high=min(tp.ci_high, 1e18),
        steps_timed=len(t.step_times), compile_seconds=compile_s, peak_memory_gib=peak, extra=t,
    )


# ---------------------------------------------------------------------------------------------
# FLOPs and peaks


def flops_per_sample(spec: WorkloadSpec, n: int = 2) -> float | None:
    """Forward + backward FLOPs of one sample, counted by torch on a tiny CPU batch."""
    from torch.utils.flop_counter import FlopCounterMode

    try:
        config = ProbeConfig(accelerator="cpu", batch_size=n)
        module = build_module(spec, config, synthetic=not spec.datamodule)
        if spec.datamodule:
            dm = build_datamodule(spec, config)
            dm.prepare_data()
            dm.setup("fit")
            batch = next(iter(dm.train_dataloader()))
            n = len(batch[0]) if isinstance(batch, (list, tuple)) else n
        else:
            ds = SyntheticDataModule(spec.image_size, spec.num_classes, n)
            batch = next(iter(ds.train_dataloader()))
        batch = module.on_after_batch_transfer(batch, 0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with FlopCounterMode(display=False) as counter:
                out = module.training_step(batch, 0)
                loss = out["loss"] if isinstance(out, dict) else out
                loss.backward()
        return counter.get_total_flops() / n
    except Exception as e:  # noqa: BLE001 - a user's module may not run outside a Trainer; FLOPs are optional
        log.warning("FLOPs not counted: %s: %s", type(e).__name__, e)
        return None


def _dtype(precision: str) -> torch.dtype:
    return {"bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}.get(precision, torch.float32)


def matmul_peak_tflops(accelerator: str, precision: str, seconds: float = 1.0) -> float | None:
    """A short large matmul in the precision the winner computes in: the practical peak.

    The size grows until one product takes a twentieth of the budget, so a device that emulates
    the dtype still answers within `seconds`. The product is a @ b.T, the layout nn.Linear runs
    (x @ W^T): on an AVX2-only CPU a bf16 a @ b takes a fallback path at ~1.3 GFLOP/s while
    a @ b.T and the model's own layers run at ~15, which made utilisation read 1000%.
    """
    from .timing import synchronize

    try:
        dtype = _dtype(precision)
        if accelerator == "gpu":
            dev, n, n_max = torch.device("cuda"), 1024, 16384
        elif accelerator == "mps":
            dev, n, n_max = torch.device("mps"), 512, 8192
        elif accelerator == "cpu":
            dev, n, n_max = torch.device("cpu"), 256, 4096
        else:
            return None  # XLA: a traced matmul measures the compiler, not the chip

        def once(size: int) -> float:
            a = torch.randn(size, size, device=dev, dtype=dtype)
            b = torch.randn(size, size, device=dev, dtype=dtype)
            a @ b.T  # first call: allocation and kernel selection
            synchronize(accelerator)
            t0 = time.perf_counter()
            a @ b.T
            synchronize(accelerator)
            return time.perf_counter() - t0

        while n < n_max and once(n) < seconds / 20:
            n *= 2
        a = torch.randn(n, n, device=dev, dtype=dtype)
        b = torch.randn(n, n, device=dev, dtype=dtype)
        reps, t0 = 0, time.perf_counter()
        while True:
            a @ b.T
            reps += 1
            synchronize(accelerator)
            elapsed = time.perf_counter() - t0
            if elapsed >= seconds and reps >= 2:
                break
        return 2 * n**3 * reps / elapsed / 1e12
    except Exception as e:  # noqa: BLE001 - a peak we cannot measure is left out, not fatal
        log.warning("matmul peak not measured: %s", e)
        return None


def datasheet_dtype(precision: str) -> str:
    if precision == "bf16-mixed":
        return "bf16"
    if precision == "16-mixed":
        return "fp16"
    return "fp32" if torch.get_float32_matmul_precision() == "highest" else "tf32"


def datasheet_peak_tflops(hw, accelerator: str, precision: str) -> float | None:
    """Per device for a GPU (catalog accelerator data), for the whole CPU (its ISA arithmetic)."""
    try:
        from catalog import accelerators as acc
    except ImportError:
        return None
    dtype = datasheet_dtype(precision)
    try:
        if accelerator == "gpu" and hw.gpus:
            spec = acc.lookup(hw.gpus[0].name, memory_gib=hw.gpus[0].memory_gib)
            return acc.peak_tflops(spec, dtype) if spec is not None else None
        if accelerator == "cpu" and hw.physical_cores and hw.cpu_clock_ghz:
            return acc.cpu_peak_tflops(hw.physical_cores, hw.cpu_clock_ghz, set(hw.isa_flags), dtype,
                                       hw.cpu_manufacturer)
    except Exception as e:  # noqa: BLE001 - the catalog's peak data is another module's: never fail the probe on it
        log.warning("datasheet peak unknown: %s", e)
    return None


def reset_peak_rss() -> None:
    """Restart the process's RSS high-water mark (Linux 4.0+), so a rung's peak is its own and not
    that of a bigger batch tried before it; elsewhere the peak stays the process's lifetime one."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def peak_rss_gib() -> float:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 2**20  # kB
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


# ---------------------------------------------------------------------------------------------
# Profiling the winner


def profiler_callback(out_dir: str, accelerator: str):
    from lightning.pytorch.callbacks import Callback
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    class TraceCallback(Callback):
        def on_train_start(self, trainer, pl_module):
            acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if accelerator == "gpu" else [])
            self.prof = profile(
                activities=acts, schedule=schedule(wait=1, warmup=4, active=3, repeat=1),
                on_trace_ready=tensorboard_trace_handler(out_dir), record_shapes=True, profile_memory=True,
            )
            self.prof.__enter__()

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            self.prof.step()

        def on_train_end(self, trainer, pl_module):
            self.prof.__exit__(None, None, None)

    return TraceCallback()


# ---------------------------------------------------------------------------------------------
# The probe


@dataclass
class ProbeOptions:
    spec: WorkloadSpec = field(default_factory=WorkloadSpec)
    accelerator: str = "auto"
    devices: int | None = None
    num_nodes: int = 1
    strategy: str | None = None
    precision: str = "32-true"
    tune: bool = True
    target_ci: float = 0.03
    max_seconds: float = 60.0
    warmup_steps: int = 3
    max_steps: int | None = None
    compile_timeout: float = 300.0
    instance_type: str | None = None
    profile_dir: str | None = None
    skip: frozenset[str] = frozenset()
    progress_bar: bool = False
    matmul_seconds: float = 1.0


def quiet_lightning(verbose: bool = False) -> None:
    """Lightning's banner lines and our deliberate 0-worker baseline warning are noise here."""
    level = logging.INFO if verbose else logging.WARNING
    for name in ("lightning.pytorch", "lightning.fabric", "lightning"):
        logging.getLogger(name).setLevel(level)
    # Inductor on a CPU-only host with a CUDA torch build says so once per compile: not news here.
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.INFO if verbose else logging.ERROR)
    warnings.filterwarnings("ignore", message=".*does not have many workers.*")
    # The probe's module normalises on the device in on_after_batch_transfer on purpose.
    warnings.filterwarnings("ignore", message=".*overridden `on_after_batch_transfer`.*")
    warnings.filterwarnings("ignore", message=".*isinstance\\(treespec, LeafSpec\\).*")
    warnings.filterwarnings("ignore", message=".*(tensorboardX|TensorBoard).*")
    warnings.filterwarnings("ignore", message=".*precision.*is not supported by the model summary.*")


def preflight(opts: ProbeOptions) -> str:
    """Everything that can be wrong with the request, checked before any training; the accelerator."""
    workloads.check(opts.spec)
    accelerator = resolve_accelerator(opts.accelerator)
    if accelerator == "cpu" and opts.precision == "16-mixed":
        # Lightning would run bf16-mixed instead, and the result would be filed as fp16.
        raise WorkloadError("--precision 16-mixed is not supported on cpu: use bf16-mixed or 32-true")
    if opts.strategy:
        from lightning.pytorch.strategies import StrategyRegistry

        known = ("auto", *StrategyRegistry.available_strategies())
        if opts.strategy not in known:
            raise WorkloadError(f"unknown --strategy {opts.strategy!r}: use auto, ddp, ddp_spawn, fsdp, deepspeed, ...")
    return accelerator


def run_probe(opts: ProbeOptions, on_rung: Callable[[RungResult, RungResult | None], None] | None = None,
              measure_fn: Callable[[str, ProbeConfig], Measurement] | None = None) -> ProbeResult | None:
    """Climb the ladder and return the finished result (raises on a failed baseline).

    None on the extra ranks of a DDP run: only rank 0 reports."""
    started = datetime.now(timezone.utc)
    spec = opts.spec
    accelerator = preflight(opts)
    hw = hardware.fingerprint()
    devices, strategy = default_devices(accelerator, hw)
    if opts.devices is not None:
        devices = opts.devices
    if opts.strategy:
        strategy = opts.strategy
    if devices < 1:
        raise WorkloadError(f"no {accelerator} devices to train on")
    if accelerator == "gpu" and devices > torch.cuda.device_count():
        raise WorkloadError(f"--devices {devices}: this machine has {torch.cuda.device_count()} GPU(s)")

    start = ProbeConfig(accelerator=accelerator, devices=devices, num_nodes=opts.num_nodes,
                        strategy=strategy, precision=opts.precision, batch_size=spec.batch_size)
    settings = MeasureSettings(spec, opts.warmup_steps, opts.target_ci, opts.max_seconds, opts.max_steps,
                               opts.compile_timeout, opts.progress_bar)
    best_sps: list[float] = []

    def slow_limit(cfg: ProbeConfig) -> float | None:
        if not best_sps:
            return None
        expected = cfg.batch_size * cfg.devices * cfg.num_nodes / best_sps[-1]
        return max(SLOW_FACTOR * expected, MIN_SLOW_STEP_S)

    def measure_one(rung: str, cfg: ProbeConfig) -> Measurement:
        if measure_fn is not None:
            return measure_fn(rung, cfg)
        return measure(settings, cfg, slow_step_s=slow_limit(cfg))

    def track(rung: RungResult, base: RungResult | None) -> None:
        if rung.kept:
            best_sps.append(rung.samples_per_sec)
        if on_rung is not None:
            on_rung(rung, base)

    workers_ok = True
    if spec.datamodule:
        _, dm_cls = workloads.user_classes(spec)
        workers_ok = workloads.accepts(dm_cls, "num_workers")
    ladder_opts = LadderOptions(
        tune=opts.tune, batch_fixed=spec.batch_size_fixed, half_precision=half_precision(accelerator),
        vision=workloads.is_vision(spec), worker_counts=worker_counts(), workers_supported=workers_ok,
        pin_memory=accelerator == "gpu",
        ipex_missing=ipex_missing() if accelerator == "cpu" else None,
        ipex_skip=(None if accelerator == "cpu" and workloads.is_builtin(spec)
                   else "ipex.optimize is applied to builtin workloads on CPU only"),
        skip=opts.skip,
    )
    lad = run_ladder(start, measure_one, ladder_opts, track)
    best, m = lad.best, lad.best_measurement
    timing = m.extra

    profile_dir = None
    if opts.profile_dir:
        os.makedirs(opts.profile_dir, exist_ok=True)
        try:
            # The trace is written only once the schedule's 8 steps have run, so the stopping rule
            # (a converged CI, --max-seconds) must not end this pass early: the step cap does.
            whole = replace(settings, target_ci=0.0, max_seconds=math.inf, max_steps=None)
            measure(whole, best.config, extra_callbacks=[profiler_callback(opts.profile_dir, accelerator)],
                    max_steps=9)
            profile_dir = os.path.abspath(opts.profile_dir)
        except Exception as e:  # noqa: BLE001
            log.warning("profile failed: %s", e)

    if not is_global_zero():
        return None  # the other DDP ranks trained along; measuring peaks there would slow rank 0's

    fps = flops_per_sample(spec)
    achieved = m.samples_per_sec * fps / 1e12 if fps else None
    per_device_peak = datasheet_peak_tflops(hw, accelerator, best.config.precision)
    ranks = best.config.devices * best.config.num_nodes
    # A GPU datasheet figure is per device; the CPU's covers the whole machine whatever the ranks.
    devices_in_peak = ranks if accelerator != "cpu" else 1
    peak_ds = per_device_peak * devices_in_peak if per_device_peak else None
    # Measured on rank 0's device (or, for CPU ranks, its share of the cores): one share per rank.
    mm = matmul_peak_tflops(accelerator, best.config.precision, opts.matmul_seconds)
    share = ranks if accelerator != "cpu" else max(1.0, min(ranks, (os.cpu_count() or 1) / torch.get_num_threads()))
    peak_mm = mm * share if mm else None
    # The winning rung's own peak: the process's would include every larger batch tried.
    peak_mem = best.peak_memory_gib if best.peak_memory_gib is not None else peak_rss_gib()

    instance_type, source = opts.instance_type, "given" if opts.instance_type else None
    if instance_type is None and (found := hardware.ec2_instance_type()):
        instance_type, source = found, "imds"

    stats = step_stats(timing.step_times, timing.warmup_steps, timing.warmup_seconds)
    return ProbeResult(
        workload=spec, workload_id=spec.workload_id, instance_type=instance_type,
        instance_type_source=source, hardware=hw, software=hardware.software_versions(),
        config=best.config, samples_per_sec=m.samples_per_sec, samples_per_sec_ci=(m.ci_low, m.ci_high),
        step_time=stats, flops_per_sample=fps, achieved_tflops=achieved,
        peak_tflops_datasheet=peak_ds, utilisation_datasheet=achieved / peak_ds if achieved and peak_ds else None,
        peak_tflops_matmul=peak_mm, utilisation_matmul=achieved / peak_mm if achieved and peak_mm else None,
        peak_memory_gib=peak_mem, ladder=lad.rungs, started_at=started, stop_reason=timing.reason,
        devices_in_peak=devices_in_peak, profile_dir=profile_dir,
    )


def is_global_zero() -> bool:
    """False in the extra processes a DDP launch starts: only rank 0 writes files and the store."""
    return int(os.environ.get("LOCAL_RANK", "0")) == 0 and int(os.environ.get("NODE_RANK", "0")) == 0

"""A model bigger than the probing machine: counted whole on the meta device, measured as
shallower copies of the same width, extrapolated to its full depth (contract/extrapolate.py).

`advisor probe --depth-arg n_layer --depths 1,2,3` climbs the ladder on the deepest copy (depth 3),
then times every copy in the winning configuration in rounds, back to back (time_rounds: the band
is the rounds' spread, carried to the full depth by fit_depths), counts each copy's FLOPs, traffic
and ops on the CPU, and writes one result for the full model: its workload (and id) as given, its
parameters counted without allocating them, every per-step figure extrapolated, the CI the fit's
band; `extrapolation` says from which depths, the line and its uncertainty.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace

import torch

from ..contract.extrapolate import DepthError, at_depth, check_full_depth, error_figure, fit_depths, widen
from ..contract.options import MeasureSettings, ProbeOptions
from ..contract.result import DepthPoint, Extrapolation, ProbeConfig, ProbeResult, WorkloadSpec, utilisation
from . import workloads
from .measure import samples_per_step
from .peaks import per_sample_counts
from .workloads import WorkloadError


def count_on_meta(spec: WorkloadSpec) -> tuple[int, int, float]:
    """(parameters, trainable, bytes as stored) of the user's module built on the meta device: shapes
    and dtypes, no storage, so a model of any size is counted on any machine."""
    with torch.device("meta"):
        module = workloads.build_user_module(spec, None)
    params = list(module.parameters())
    return (sum(p.numel() for p in params), sum(p.numel() for p in params if p.requires_grad),
            float(sum(p.numel() * p.element_size() for p in params)))


def at(spec: WorkloadSpec, depth_arg: str, depth: int) -> WorkloadSpec:
    return spec.model_copy(update={"init_args": {**spec.init_args, depth_arg: depth}})


def full_depth(opts: ProbeOptions) -> int:
    """The full model's depth, checked against --depths (a one-line WorkloadError)."""
    spec = opts.spec
    if workloads.is_builtin(spec):
        raise WorkloadError(f"--depths is for your own LightningModule, not the builtin {spec.model}")
    module_cls, _ = workloads.user_classes(spec)
    if opts.depth_arg not in spec.init_args and not workloads.accepts(module_cls, opts.depth_arg):
        raise WorkloadError(f"--depth-arg {opts.depth_arg}: {spec.model} takes no argument of that name")
    full = spec.init_args.get(opts.depth_arg, workloads.default_of(module_cls, opts.depth_arg))
    try:
        return check_full_depth(full, opts.depth_arg, opts.depths)
    except DepthError as e:
        raise WorkloadError(str(e)) from None


def deeper_options(opts: ProbeOptions) -> ProbeOptions:
    """The options that probe the deepest of the copies (what the ladder climbs on)."""
    return replace(opts, spec=at(opts.spec, opts.depth_arg, opts.depths[-1]), depth_arg=None, depths=None)


@dataclass
class Rounds:
    """The copies timed in rounds: each round's mean step time per depth, and each depth's peak memory."""

    steps: list[dict[int, float]] = field(default_factory=list)
    peaks: dict[int, float] = field(default_factory=dict)


def time_rounds(opts: ProbeOptions, config: ProbeConfig, depths: tuple[int, ...], measure_one) -> Rounds:
    """Every depth once a round, back to back, for opts.depth_rounds rounds, the order reversed every
    other round so that no depth always comes first; `measure_one(depth, settings, label)` times one
    copy in `config` (its contended steps left out by the measurement itself, as for any rung). The
    benchmark times the full model in these rounds as well."""
    per_copy = opts.max_seconds / opts.depth_rounds
    out = Rounds()
    for r in range(opts.depth_rounds):
        row: dict[int, float] = {}
        for depth in depths if r % 2 == 0 else depths[::-1]:
            spec = at(opts.spec, opts.depth_arg, depth).model_copy(update={"batch_size": config.batch_size})
            settings = replace(MeasureSettings.from_options(replace(opts, spec=spec)), max_seconds=per_copy)
            m = measure_one(depth, settings, f"depth {depth} round {r + 1}")
            row[depth] = samples_per_step(config) / m.samples_per_sec
            if m.peak_memory_gib is not None:
                out.peaks[depth] = max(out.peaks.get(depth, 0.0), m.peak_memory_gib)
        out.steps.append(row)
    return out


def extrapolated(opts: ProbeOptions, deep: ProbeResult, rounds: Rounds, counts: dict[int, tuple],
                 meta: tuple[int, int, float], full: int) -> ProbeResult:
    """The deepest copy's result carried to `full` layers (the arithmetic: contract/extrapolate.py)."""
    depths = opts.depths
    b = depths[-1]
    per_step = samples_per_step(deep.config)
    fit = fit_depths(rounds.steps)
    s = deep.shape
    points = []
    for d in depths:
        f, t, x, o = counts[d]
        points.append(DepthPoint(depth=d, step_s=statistics.fmean(r[d] for r in rounds.steps),
                                 parameters=s.parameters if s and d == b else None, flops_per_sample=f,
                                 memory_traffic_bytes_per_sample=t, other_traffic_bytes_per_sample=x, ops_per_step=o,
                                 peak_memory_gib=deep.peak_memory_gib if d == b else rounds.peaks.get(d)))

    def ext(name: str) -> float | None:
        return at_depth([(p.depth, getattr(p, name)) for p in points], full)

    step = fit.step_s(full)
    rate = per_step / step
    err = error_figure()
    lo_s, hi_s = fit.band(full)
    ci = widen((per_step / hi_s, per_step / lo_s), rate, err.relative_error)
    k = step * deep.samples_per_sec / per_step  # the deepest copy's step-time spread, carried to the full depth
    st = deep.step_time
    stats = st.model_copy(update={f: getattr(st, f) * k for f in ("mean_s", "median_s", "stdev_s", "p10_s", "p90_s")})
    flops = ext("flops_per_sample")
    achieved = rate * flops / 1e12 if flops else None
    peak = ext("peak_memory_gib")
    params, trainable, pbytes = meta
    grow = params / s.parameters if s and s.parameters else None  # weights, gradients, optimizer state
    shape = None
    if s is not None:
        mem = s.memory
        if mem is not None and mem.fixed_gib is not None and peak and deep.peak_memory_gib:
            r = peak / deep.peak_memory_gib
            mem = mem.model_copy(update={"fixed_gib": mem.fixed_gib * r, "per_sample_gib": mem.per_sample_gib * r,
                                         "note": f"the depth-{b} copy's fit, scaled by the extrapolated peak "
                                                 f"({r:.3g}x)"})
        ops = ext("ops_per_step")
        shape = s.model_copy(update={
            "parameters": params, "trainable_parameters": trainable, "parameter_bytes": pbytes,
            "optimizer_state_bytes": s.optimizer_state_bytes * grow if grow and s.optimizer_state_bytes else None,
            "memory": mem, "memory_traffic_bytes_per_sample": ext("memory_traffic_bytes_per_sample"),
            "other_traffic_bytes_per_sample": ext("other_traffic_bytes_per_sample"),
            "ops_per_step": round(ops) if ops else None})
    util_ds, _ = utilisation(achieved, deep.peak_tflops_datasheet, "datasheet")
    util_mm, _ = utilisation(achieved, deep.peak_tflops_matmul, "measured matmul")
    extra = Extrapolation(depth_arg=opts.depth_arg, full_depth=full, points=points, rounds=fit.rounds,
                          intercept_s=fit.intercept_s, slope_s=fit.slope_s, intercept_se_s=fit.intercept_se,
                          slope_se_s=fit.slope_se, covariance_s2=fit.covariance, step_band_s=(lo_s, hi_s),
                          relative_error=err.relative_error, error_source=err.source)
    data = deep.model_dump()
    data.update(
        workload=opts.spec.model_dump(), workload_id=opts.spec.workload_id, samples_per_sec=rate,
        samples_per_sec_ci=ci, step_time=stats.model_dump(), flops_per_sample=flops, achieved_tflops=achieved,
        utilisation_datasheet=util_ds, utilisation_matmul=util_mm, peak_memory_gib=peak,
        shape=shape.model_dump() if shape else None, extrapolation=extra.model_dump(),
        tokens_per_sec=rate * s.tokens_per_sample if s and s.tokens_per_sample else None)
    return ProbeResult.model_validate(data)


def run_shallow(opts: ProbeOptions, run_probe, measure_anywhere, **kw) -> ProbeResult | None:
    """Probe the deepest copy through `run_probe` (the ladder picks the configuration), then time
    every copy in its configuration in rounds through `measure_anywhere` (both probe.py's: passed
    in, so that this module does not import it back)."""
    full = full_depth(opts)
    meta = count_on_meta(opts.spec)
    deep = run_probe(deeper_options(opts), **kw)
    if deep is None:
        return None  # another rank
    from .preview import preview

    measure_fn = kw.get("measure_fn")

    def measure_one(depth: int, settings: MeasureSettings, label: str):
        if measure_fn is not None:
            return measure_fn(f"depth {depth}", deep.config)
        return measure_anywhere(settings, deep.config, label=label)

    rounds = time_rounds(opts, deep.config, opts.depths, measure_one)
    counts = {}
    for d in opts.depths:
        if d == opts.depths[-1] and deep.shape is not None:
            s = deep.shape
            counts[d] = (deep.flops_per_sample, s.memory_traffic_bytes_per_sample, s.other_traffic_bytes_per_sample,
                         s.ops_per_step)
        else:
            spec = at(opts.spec, opts.depth_arg, d).model_copy(update={"batch_size": deep.config.batch_size})
            counts[d] = per_sample_counts(spec, preview(spec).first_batch)
    return extrapolated(opts, deep, rounds, counts, meta, full)

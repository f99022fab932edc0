"""A model bigger than the probing machine: counted whole on the meta device, measured as two
shallower copies of the same width, extrapolated to its full depth (contract/extrapolate.py).

`advisor probe --depth-arg n_layer --depths 2,4` climbs the ladder on the deeper copy (depth 4),
measures the shallower one (depth 2) in the winning configuration, counts both copies' FLOPs,
traffic and ops on the CPU, and writes one result for the full model: its workload (and id) as
given, its parameters counted without allocating them, every per-step figure extrapolated and the
CI widened by the extrapolation's measured error; `extrapolation` says from which depths.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from ..contract.extrapolate import DepthError, at_depth, check_full_depth, error_figure, widen
from ..contract.options import MeasureSettings, ProbeOptions
from ..contract.result import DepthPoint, Extrapolation, ProbeResult, WorkloadSpec, utilisation
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
    """The options that probe the deeper of the two copies (what the ladder climbs on)."""
    return replace(opts, spec=at(opts.spec, opts.depth_arg, opts.depths[1]), depth_arg=None, depths=None)


def extrapolated(opts: ProbeOptions, deep: ProbeResult, shallow_rate: float, shallow_peak: float | None,
                 shallow_counts: tuple, meta: tuple[int, int, float], full: int) -> ProbeResult:
    """The deeper copy's result carried to `full` layers (the arithmetic: contract/extrapolate.py)."""
    a, b = opts.depths
    per_step = samples_per_step(deep.config)
    fa, ta, xa, oa = shallow_counts
    s = deep.shape
    pa = DepthPoint(depth=a, step_s=per_step / shallow_rate, flops_per_sample=fa, memory_traffic_bytes_per_sample=ta,
                    other_traffic_bytes_per_sample=xa, ops_per_step=oa, peak_memory_gib=shallow_peak)
    pb = DepthPoint(depth=b, step_s=per_step / deep.samples_per_sec, parameters=s.parameters if s else None,
                    flops_per_sample=deep.flops_per_sample, ops_per_step=s.ops_per_step if s else None,
                    memory_traffic_bytes_per_sample=s.memory_traffic_bytes_per_sample if s else None,
                    other_traffic_bytes_per_sample=s.other_traffic_bytes_per_sample if s else None,
                    peak_memory_gib=deep.peak_memory_gib)

    def ext(field: str) -> float | None:
        return at_depth((a, getattr(pa, field)), (b, getattr(pb, field)), full)

    step = ext("step_s")
    rate = per_step / step
    k = step / pb.step_s  # every step time scales by the same factor
    err = error_figure()
    ci = widen((deep.samples_per_sec_ci[0] / k, deep.samples_per_sec_ci[1] / k), rate, err.relative_error)
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
    extra = Extrapolation(depth_arg=opts.depth_arg, full_depth=full, points=[pa, pb],
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
    """Probe the deeper copy through `run_probe`, measure the shallower one through
    `measure_anywhere` (both probe.py's: passed in, so that this module does not import it back)."""
    full = full_depth(opts)
    meta = count_on_meta(opts.spec)
    deep = run_probe(deeper_options(opts), **kw)
    if deep is None:
        return None  # another rank
    from .preview import preview

    spec_a = at(opts.spec, opts.depth_arg, opts.depths[0]).model_copy(update={"batch_size": deep.config.batch_size})
    shallow_opts = replace(opts, spec=spec_a, depth_arg=None, depths=None)
    measure_fn = kw.get("measure_fn")
    m = (measure_fn("shallow", deep.config) if measure_fn is not None
         else measure_anywhere(MeasureSettings.from_options(shallow_opts), deep.config, label=f"depth {opts.depths[0]}"))
    pv = preview(spec_a)
    counts = per_sample_counts(spec_a, pv.first_batch)
    return extrapolated(opts, deep, m.samples_per_sec, m.peak_memory_gib, counts, meta, full)

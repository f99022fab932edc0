"""A probe result's text: the ladder table and the summary lines `advisor probe` prints when it is
done, the progress line of each rung and confirmation leg, and the fields `advisor results show`
lists (advisor/render/__init__.py: every way a result is shown)."""

from __future__ import annotations

import sys

from lightning_module.contract.race import RACED
from lightning_module.contract.reliability import baseline_moved, moved_line, speedup_over_baseline
from lightning_module.contract.result import canonical_json
from lightning_module.contract.threads import thread_words

from ..output import emit

LADDER_COLUMNS = ("rung", "status", "samples/s", "ci", "x baseline", "batch", "precision", "kept", "reliable", "note")


def ci_text(samples_per_sec: float, ci_low: float, ci_high: float) -> str:
    """The 95% CI as a relative half-width, for tables."""
    if not samples_per_sec > 0:  # a rung that measured nothing has no relative width
        return ""
    rel = (ci_high - ci_low) / 2 / samples_per_sec
    return f"±{rel:.1%}" if rel < 1 else ">±100%"


def _pct(r) -> str:
    if r.samples_per_sec is None or r.ci_high is None or r.ci_low is None:
        return ""
    return ci_text(r.samples_per_sec, r.ci_low, r.ci_high)


def rung_doubts(r) -> list[str]:
    """Why a measured rung's number is shaky, briefly: contended, or its CI never reached the
    target (`results show` and the JSON carry the whole record)."""
    from lightning_module.contract.contention import brief

    out = []
    if r.contention is not None and r.contention.contended:
        out.append(brief(r.contention))
    if r.ci_target_met is False and r.stop_reason not in RACED:  # a raced rung stopped once its answer was known
        out.append("CI above target" + (f" after {r.remeasured} re-measurement(s)" if r.remeasured else ""))
    return out


def ladder_rows(rungs, confirmation=None) -> list[dict]:
    """The ladder table; with a baseline that moved before the confirmation, no ratio to it (they
    would be the machine's change, not the rungs')."""
    moved = confirmation is not None and baseline_moved(confirmation.baseline_shift)
    base = rungs[0].samples_per_sec if rungs and rungs[0].samples_per_sec and not moved else None
    rows = []
    for k, r in enumerate(rungs):
        doubts = rung_doubts(r) if r.status == "ok" else []
        note = [x for x in (r.error, r.note) if x]
        if r.compile_seconds:
            note.append(f"compile {r.compile_seconds:.0f} s")
        if r.stop_reason in RACED:
            note.append(f"raced: {r.stop_reason} after {r.steps_timed} steps")
        if r.remeasured and r.ci_target_met:
            note.append(f"re-measured {r.remeasured}x")
        if moved and k == 0:
            note.append(f"moved {confirmation.baseline_shift:.2f}x by the confirmation: no ratio to it is a speed-up")
        rows.append({
            "rung": r.rung,
            "status": r.status,
            "samples/s": round(r.samples_per_sec, 2) if r.samples_per_sec is not None else None,
            "ci": _pct(r),
            "x baseline": round(r.samples_per_sec / base, 2) if base and r.samples_per_sec else None,
            "batch": r.config.batch_size,
            "precision": r.config.precision,
            "kept": "yes" if r.kept else "",
            # A rung from before the probe judged its numbers has no verdict to show.
            "reliable": ("no" if doubts else "" if r.contention is None and r.ci_target_met is None else "yes")
            if r.status == "ok" else "",
            "note": "; ".join(note + doubts),
        })
    return rows


def rung_line(rung, base) -> str:
    if rung.status == "ok":
        ratio = f" {rung.samples_per_sec / base.samples_per_sec:.2f}x" if base and base.samples_per_sec else ""
        doubts = rung_doubts(rung)
        return (f"probe: {rung.rung:<14} {rung.samples_per_sec:10.2f} samples/s {_pct(rung):>7} "
                f"({rung.steps_timed} steps){ratio}{'  kept' if rung.kept else ''}"
                + (f"  [{'; '.join(doubts)}]" if doubts else ""))
    return f"probe: {rung.rung:<14} {rung.status}: {rung.error}"


def leg_line(name: str, m) -> str:
    contended = "  [contended]" if m.contention is not None and m.contention.contended else ""
    return f"probe: confirm {name:<8} {m.samples_per_sec:10.2f} samples/s ({m.steps_timed} steps){contended}"


def _mb(n: float) -> str:
    if n < 2**20:
        return f"{n / 2**10:,.1f} KiB"
    return f"{n / 2**20:,.1f} MiB" if n < 2**30 else f"{n / 2**30:,.2f} GiB"


def shape_lines(r) -> list[str]:
    """The workload's shape as the probe recorded it (ProbeResult.shape; none in a schema 1 result)."""
    s = r.shape
    if s is None:
        return []
    source = {"datamodule": "its DataModule", "module": "its own train_dataloader()", "synthetic": "synthetic images"}
    parts = []
    if s.parameters is not None:
        parts.append(f"{s.parameters:,} parameters ({_mb(s.parameter_bytes)})")
    if s.optimizer_state_bytes is not None:
        parts.append(f"optimizer state {_mb(s.optimizer_state_bytes)}")
    parts.append(f"data from {source[s.data_source]}")
    parts.append("batch tunable" if s.batch_tunable else "batch not tunable" + (f" ({s.batch_note})" if s.batch_note else ""))
    if s.samples_counted_by == "hook":
        parts.append("samples counted by samples_in_batch()")
    lines = [f"workload: {'; '.join(parts)}"]
    if (m := s.memory) is not None:
        at = ", ".join(f"{p.batch_size}: {p.peak_gib:.3g}" for p in m.points)
        what = "GPU allocated" if m.where == "accelerator" else "process RSS"
        fit = (f"{m.fixed_gib:.3g} GiB + {m.per_sample_gib * 1024:.3g} MiB/sample" if m.fixed_gib is not None
               else "no fit")
        lines.append(f"memory fit{' (derived)' if m.derived else ''}: {fit} ({what}; GiB at batch {at})"
                     + (f"; {m.note}" if m.note else ""))
    if s.memory_traffic_bytes_per_sample and r.flops_per_sample:
        lines.append(f"intensity: {r.flops_per_sample / s.memory_traffic_bytes_per_sample:.3g} FLOP/byte "
                     f"({_mb(s.memory_traffic_bytes_per_sample)} of op-level memory traffic per sample, unfused)"
                     + (f"; {s.memory_traffic_note}" if s.memory_traffic_note else ""))
    if s.other_traffic_bytes_per_sample and r.flops_per_sample:
        lines.append(f"split intensity: {r.flops_per_sample / s.other_traffic_bytes_per_sample:.3g} FLOP/byte "
                     f"({_mb(s.other_traffic_bytes_per_sample)} per sample moved by the ops without FLOPs: the "
                     "bandwidth-bound share the cross-device model reads)")
    if s.ops_per_step:
        lines.append(f"ops: {s.ops_per_step:,} a step (training_step + backward, dispatched one by one: on a GPU "
                     "the host's floor for a small model)")
    if r.pipeline_samples_per_sec_per_worker:
        lines.append(f"data pipeline: {r.pipeline_samples_per_sec_per_worker:,.0f} samples/s per worker "
                     "(the loader alone, no model)")
    return lines + token_lines(r)


def token_lines(r) -> list[str]:
    """Tokens, activations, each rank's peak, the runtime's memory and the extrapolation (schema 6)."""
    s, lines = r.shape, []
    if s is not None and s.tokens_per_sample and r.tokens_per_sec:
        by = "tokens_in_batch()" if s.tokens_counted_by == "hook" else "the batch's [batch, sequence] ids"
        lines.append(f"tokens: {s.tokens_per_sample:,.4g} a sample (counted by {by}), {r.tokens_per_sec:,.0f} tokens/s")
    if s is not None and (a := s.activations) is not None:
        lines.append(f"activations: {a.bytes_per_token_per_layer:,.0f} B/token/layer over {a.layers} {a.layer_class} "
                     f"layers ({a.checkpointed_bytes_per_token_per_layer:,.0f} with activation checkpointing), "
                     f"{a.bytes_per_token_outside_layers:,.0f} B/token outside them ({a.precision})")
    if r.rank_peak_memory_gib:
        lines.append("peak memory by rank: " + ", ".join(f"{g:.3g}" for g in r.rank_peak_memory_gib) + " GiB")
    if (o := r.runtime_overhead) is not None:
        lines.append(f"runtime memory: {o.context_gib:.3g} GiB before the model"
                     + (f", allocator slack {o.allocator_gib:.3g} GiB at the peak" if o.allocator_gib is not None else ""))
    if (x := r.extrapolation) is not None:
        depths = ", ".join(str(p.depth) for p in x.points)
        line = f"extrapolated: {x.depth_arg}={x.full_depth} from copies of depth {depths} (parameters counted on the meta device)"
        if x.rounds is not None and x.intercept_s is not None and x.slope_s is not None:  # schema 11: the fit
            line += (f"; step = {x.intercept_s * 1e3:.3g} ms (+/- {(x.intercept_se_s or 0) * 1e3:.2g}) + "
                     f"{x.slope_s * 1e3:.3g} ms (+/- {(x.slope_se_s or 0) * 1e3:.2g}) a layer over {x.rounds} rounds")
        lines.append(line + f"; the CI widened by {x.relative_error:.0%} each side ({x.error_source})")
    return lines


def describe(config) -> str:
    parts = [config.accelerator + (f" x{config.devices}" if config.devices > 1 else ""), config.precision]
    if config.channels_last:
        parts.append("channels_last")
    if config.compile:
        parts.append("compiled" + (f" ({config.compile_backend})" if config.compile_backend != "inductor" else ""))
    parts.append(f"batch {config.batch_size}")
    parts.append(f"{config.num_workers} workers" + (" +pin_memory" if config.pin_memory else ""))
    if (threads := thread_words(config)) is not None:  # what a training run on this machine should set
        parts.append(threads)
    if config.run_cpu:
        parts.append("run_cpu (" + ", ".join([config.allocator or "default allocator",
                                              "Intel OpenMP" if config.openmp == "intel" else "default OpenMP",
                                              "pinned cores"]) + ")")
    if config.ipex:
        parts.append("ipex")
    if config.xla:
        parts.append("torch_xla")
    return ", ".join(parts)


def gpu_and_cpu_line(g) -> str:
    """`--cpu-too`'s record: each rank alone, both together, the split and the verdict."""
    alone = " + ".join(f"{r.device} {r.samples_per_sec_alone:,.1f}" for r in g.ranks)
    split = ", ".join(f"{r.device} {r.batch_size}" + (f" in {r.precision}" if r.precision else "") for r in g.ranks)
    first = g.ranks[0]
    if g.kept:
        verdict = f"kept: beats the {first.device} alone beyond the noise"
    elif g.samples_per_sec_ci[1] < first.samples_per_sec_alone:  # even its CI's top end loses
        verdict = f"not kept: {-g.gain:.1%} slower than the {first.device} alone"
    else:
        verdict = "not kept: no gain beyond the noise"
    return (f"alone {alone}; together {g.samples_per_sec:,.1f} samples/s (95% CI {ci_range(*g.samples_per_sec_ci)}, "
            f"{g.gain:+.1%}), efficiency {g.efficiency:.0%}, batch {split}, {g.rounds} round(s); {verdict}"
            + (f"; {g.note}" if g.note else ""))


def confirmation_line(c) -> str:
    verdict = ("held: the tuned configuration is kept" if c.held
               else "inside the noise: the tuned configuration is kept, its speed-up unconfirmed" if c.pick_kept
               else "did not hold: the baseline is kept")
    return (f"{c.speedup:.2f}x baseline (95% CI {ci_range(*c.speedup_ci)}) over {c.rounds} "
            f"A-B rounds; {verdict}" + (f"; {moved_line(c)}" if baseline_moved(c.baseline_shift)
                                         else "; contended" if c.contended else ""))


def contention_line(c) -> str:
    parts = [f"{c.contended_steps} of {c.steps} steps contended"]
    if c.wait_share is not None:
        parts.append(f"run-queue wait {c.wait_share:.0%}")
    if c.steal_share is not None:
        parts.append(f"steal {c.steal_share:.0%}")
    if c.others_share is not None:
        parts.append(f"other processes {c.others_share:.0%} of its CPUs")
    if c.cpu_share is not None:
        parts.append(f"CPU share {c.cpu_share:.0%} of {c.cores_in_use} core(s)")
    if c.load_average is not None:
        parts.append(f"load {c.load_average:.1f} on {c.cpus} CPU(s)")
    if c.gpu_other_processes:
        parts.append(f"{c.gpu_other_processes} other GPU process(es)")
    if c.gpu_clock_ratio is not None:
        parts.append(f"GPU clock {c.gpu_clock_ratio:.0%} of max")
    return ", ".join(parts)


def reliability_line(r) -> str:
    if not r.reliable:
        return "no: " + "; ".join(r.unreliable_reasons)
    if r.contention is None and r.confirmation is None:
        return "not judged (the probe that wrote this result did not record contention)"
    return "yes"


def ci_range(low: float, high: float) -> str:
    """A 95% CI as 'low-high'; an unbounded upper end (one or two timed steps) says so."""
    from lightning_module.contract.ladder import CI_UNBOUNDED

    return f"{low:.2f}-{high:.2f}" if high < CI_UNBOUNDED else f"{low:.2f}-unbounded"


def summary_lines(result, saved, out_path) -> list[str]:
    r = result
    x = speedup_over_baseline(r)  # the confirmed figure, as 'results list' stores it
    c = r.confirmation
    said = ("" if x is None and (c is None or not baseline_moved(c.baseline_shift))
            else ", no speed-up stated: the baseline moved (contended)" if x is None
            else f", {x:.2f}x baseline" + (" (confirmed)" if c is not None and c.held else
                                             " (unconfirmed)" if c is not None and c.pick_kept else
                                             " (the baseline is kept)" if c is not None else ""))
    lines = [
        (f"{'best' if c is None or c.pick_kept else 'kept'}: {r.samples_per_sec:.2f} samples/s "
         f"(95% CI {ci_range(*r.samples_per_sec_ci)}, {r.step_time.n_steps} steps, {r.stop_reason}){said}"),
        f"config: {describe(r.config)}",
    ]
    if r.confirmation is not None:
        lines.append(f"confirmed: {confirmation_line(r.confirmation)}")
    lines.append(f"reliable: {reliability_line(r)}")
    if r.contention is not None:
        lines.append(f"contention: {contention_line(r.contention)}")
    if r.flops_per_sample:
        util = []
        if r.utilisation_matmul is not None:
            util.append(f"{r.utilisation_matmul:.0%} of measured matmul peak {r.peak_tflops_matmul:.3g} TFLOP/s")
        if r.utilisation_datasheet is not None:
            util.append(f"{r.utilisation_datasheet:.0%} of datasheet peak {r.peak_tflops_datasheet:.3g} TFLOP/s")
        lines.append(f"compute: {r.flops_per_sample / 1e9:.4g} GFLOP/sample, {r.achieved_tflops:.3g} TFLOP/s"
                     + (f" = {'; '.join(util)}" if util else ""))
    if r.peak_memory_gib is not None:
        measured = "GPU allocated" if r.config.accelerator == "gpu" else "process RSS"
        lines.append(f"peak memory: {r.peak_memory_gib:.2f} GiB ({measured})")
    lines.extend(shape_lines(r))
    where = r.instance_type or "unknown instance type"
    lines.append(f"machine: {where}; {r.hardware.cpu_model or 'unknown CPU'}"
                 + (f"; {len(r.hardware.gpus)}x {r.hardware.gpus[0].name}" if r.hardware.gpus else ""))
    if (g := r.gpu_and_cpu) is not None:
        lines.append(f"cpu too: {gpu_and_cpu_line(g)}")
    if r.profile_trace:
        lines.append(f"profile: {r.profile_trace} (open in https://ui.perfetto.dev or chrome://tracing)")
    elif r.profile_dir:
        lines.append(f"profile: {r.profile_dir} (tensorboard --logdir {r.profile_dir})")
    if saved:
        lines.append(f"saved: result {r.result_id[:12]} in {saved}")
    if out_path:
        lines.append(f"wrote: {out_path}")
    return lines


def write_result(r, fmt: str, stream=None) -> None:
    """`advisor results show`: every field of one result, then its ladder (json: the whole result,
    schema `result`)."""
    stream = stream or sys.stdout
    if fmt == "json":
        from .. import schemas  # pydantic's document models: built only when JSON is asked for

        schemas.write("result", stream, result=r)
        return
    fields = [
        ("result_id", r.result_id),
        ("source", r.source),
        ("workload", f"{r.workload_id} ({r.workload.model}, {r.workload.image_size}px, {r.workload.num_classes} classes)"),
        ("arguments", "; ".join(f"{what} {canonical_json(a)}" for what, a in zip(("module", "data"), r.workload.resolved_args())
                                if a)),
        ("instance_type", f"{r.instance_type} ({r.instance_type_source})" if r.instance_type else ""),
        ("config", describe(r.config)),
        ("samples/s", f"{r.samples_per_sec:.2f} (95% CI {ci_range(*r.samples_per_sec_ci)})"),
        ("step time", (f"mean {r.step_time.mean_s * 1000:.1f} ms, p10 {r.step_time.p10_s * 1000:.1f}, "
                       f"p90 {r.step_time.p90_s * 1000:.1f}; {r.step_time.n_steps} steps, "
                       f"{r.step_time.warmup_steps} warm-up steps ({r.step_time.warmup_seconds:.1f} s) apart")),
        ("GFLOP/sample", f"{r.flops_per_sample / 1e9:.4g}" if r.flops_per_sample else ""),
        ("achieved TFLOP/s", f"{r.achieved_tflops:.3g}" if r.achieved_tflops else ""),
        ("matmul peak", f"{r.peak_tflops_matmul:.3g} TFLOP/s, utilisation {r.utilisation_matmul:.0%}"
         if r.peak_tflops_matmul and r.utilisation_matmul is not None else ""),
        ("datasheet peak", f"{r.peak_tflops_datasheet:.3g} TFLOP/s, utilisation {r.utilisation_datasheet:.0%}"
         if r.peak_tflops_datasheet and r.utilisation_datasheet is not None else ""),
        ("peak memory", f"{r.peak_memory_gib:.2f} GiB" if r.peak_memory_gib is not None else ""),
        # the workload's shape, as the probe prints it ("workload: ..." is its "shape" here)
        *((k.replace("workload", "shape"), v) for k, v in (line.split(": ", 1) for line in shape_lines(r))),
        ("reliable", reliability_line(r)),
        ("contention", contention_line(r.contention) if r.contention else ""),
        ("confirmed", confirmation_line(r.confirmation) if r.confirmation else ""),
        ("rung order", f"{', '.join(r.rung_order)} (from {r.rung_order_basis or 'not recorded'})" if r.rung_order else ""),
        ("cpu too", gpu_and_cpu_line(r.gpu_and_cpu) if r.gpu_and_cpu else ""),
        ("profile", r.profile_trace or r.profile_dir or ""),
        ("cpu", f"{r.hardware.cpu_model}, {r.hardware.physical_cores} cores, {', '.join(r.hardware.isa_flags)}"),
        ("gpus", ", ".join(f"{g.name} ({g.memory_gib:g} GiB)" for g in r.hardware.gpus)),
        ("software", f"torch {r.software.torch}, lightning {r.software.lightning}"
                     + (f", CUDA {r.software.cuda}" if r.software.cuda else "")
                     + (f", ipex {r.software.ipex}" if r.software.ipex else "")
                     + (f", zentorch {r.software.zentorch}" if r.software.zentorch else "")
                     + (f", torch_xla {r.software.torch_xla}" if r.software.torch_xla else "")),
        ("finished", r.finished_at.isoformat(timespec="seconds")),
    ]
    emit([{"field": k, "value": v} for k, v in fields if v], fmt, ("field", "value"), stream=stream)
    if not r.ladder and fmt in ("table", "markdown"):  # a training run tried nothing
        print(f"\nno ladder: {'the configuration the run trained with' if r.source == 'training run' else 'none recorded'}",
              file=stream)
        return
    if fmt in ("table", "markdown"):
        print(file=stream)
    emit(ladder_rows(r.ladder, r.confirmation), fmt, LADDER_COLUMNS, stream=stream, notes="note")

"""How fast one instance of each type trains the workload, where that number comes from and
how sure it is.

Order of trust, per instance type:
1. `measured`: the user's newest probe of this workload on this type (results store). A probe
   that says it is not reliable (ProbeResult.reliable False) keeps its figure, with a band
   widened to what the estimate without it says and a note with its reasons.
2. `reference`: a published figure for this workload on this very instance type (the reference
   dataset, advisor/estimate/references.py), read in its source: a derived one is a weak anchor of
   the estimate instead.
3. `estimated`: the cross-device model (advisor/estimate/): fitted on all reference rows,
   re-anchored by the user's probes, calibrated bands, capped by what the host can feed.
Types the workload cannot run on are returned as exclusions with the reason.

Multi-device instances: devices x per-device x efficiency; the efficiency is the smaller of the
published n-GPU scaling (advisor.estimate.calibrate.efficiency_from_pairs) and the all-reduce
model over the instance's interconnect (advisor.estimate.scaling, catalog.hardware).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path
from typing import Any

from catalog import accelerators as acc
from catalog.hardware import (
    best_dtype,
    device_count,
    device_kind,
    gpu_spec,
    interconnect,
    sustained_network_gbps,
    undrivable_gpu,
)
from catalog.models import Catalog, InstanceType
from lightning_module.contract.result import BUILTIN_MODELS
from lightning_module.contract.workload_facts import REFERENCE_IMAGE_SIZE, WorkloadFacts

from . import gpu_and_cpu
from .cache import model_for as cached_model
from .calibrate import Efficiency
from .host import apply_cap, default_rate_per_vcpu, host_cap
from .host_floor import HostFloor
from .model import CrossDeviceModel, build, from_probes
from .points import (
    MIXED,
    PRECISION_OF_DTYPE,
    PROBE_STACK,
    CpuHost,
    Point,
    at_probe_stack,
    cpu_device,
    cpu_name,
    fingerprint_cpu_host,
    gpu_device,
    instance_device,
)
from .predict import UNRELIABLE_WIDEN, Estimator, Measured, measured_from
from .references import REFERENCE_PATH, ReferenceFileError, ReferenceSet
from .scaling import DEFAULT_BATCH, intra_instance
from .shapes import intensity_of

STALE_DAYS = 30
UNRELIABLE_WEIGHT = 1.0 / UNRELIABLE_WIDEN**2  # an unreliable probe in a fit: its band twice as wide
BUILTIN, NONE = "builtin", "none"


@dataclass
class Throughput:
    """One instance of a type running the workload (all its devices)."""

    instance_type: str
    samples_per_sec: float
    low: float
    high: float
    source: str  # measured | reference | estimated
    precision: str  # the Lightning precision it runs (or would run) at
    devices: int
    step_seconds: float  # compute time of one step at DEFAULT_BATCH per device
    intra_comm_seconds: float  # all-reduce time inside the instance per step (0 for one device)
    basis: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    multi_node: dict[int, float] = field(default_factory=dict)  # k -> measured samples/s at k nodes
    # The same facts as basis, typed for the report:
    anchor: str | None = None  # estimated: the measured or published instance type it scales from
    intra_efficiency: float = 1.0  # its own devices' all-reduce efficiency inside samples_per_sec (1: measured whole)
    network_note: str | None = None  # the assumption made about its network, when one was
    # What the host's CPU would add training beside the GPUs (None: not a GPU type, or no way to say)
    gpu_and_cpu: gpu_and_cpu.GpuAndCpuGain | None = None
    # None: the GPUs alone (or a CPU type); "gpu_and_cpu": the same type with its CPU training beside
    # the GPUs, a candidate of its own (cpu_variant)
    variant: str | None = None


GPU_AND_CPU = "gpu_and_cpu"


def cpu_variant(th: Throughput) -> Throughput | None:
    """The type's "GPU + CPU" candidate, where its gain's band lies above zero (GpuAndCpuGain.variant):
    the pair's throughput and band, measured when a --cpu-too probe of this type says so. No figures
    across instances (the pair has only run on one: the planner ranks it at one instance)."""
    g = th.gpu_and_cpu
    if g is None or not g.variant or th.variant is not None:
        return None
    mid, low, high = g.together
    return replace(th, samples_per_sec=mid, low=low, high=high, source=g.source,
                   notes=list(th.notes), multi_node={}, variant=GPU_AND_CPU)


@dataclass
class Exclusion:
    instance_type: str
    reason: str



# (references, catalog) -> (model, rows on instance types, catalog, the set given); the catalog
# and the set are kept in the value so that their ids cannot be reused.
_MODELS: dict[tuple, tuple] = {}


def cross_device_model(references: str | Path | ReferenceSet, catalog: Catalog) -> tuple[CrossDeviceModel, list]:
    """The model for `--references builtin|none|FILE`, or for a ReferenceSet given directly (none:
    the builtin model's calibration, whose rows are then not used as anchors), and the set's rows
    on an AWS instance type (published figures of that very type). Built once per process,
    reference set and catalog, and kept in the cache dir between runs (estimate/cache.py)."""
    given = references if isinstance(references, ReferenceSet) else None
    key = (id(references) if given is not None else str(references), id(catalog))
    if key in _MODELS and _MODELS[key][3] is not given:
        del _MODELS[key]  # another set at a reused id
    if key not in _MODELS:
        origin = ("given reference set" if given is not None
                  else BUILTIN if str(references) in (BUILTIN, NONE) else str(references))
        try:
            if given is not None:  # no file behind it: built, not cached
                model = build(given.measurements, catalog, origin)
                rows = [m for m in given.measurements if m.instance_type]
            else:
                model, rows = cached_model(REFERENCE_PATH if origin == BUILTIN else Path(origin), origin, catalog)
        except ReferenceFileError:
            raise
        except ValueError as e:
            raise ReferenceFileError(f"reference set {origin}: {e}") from None
        _MODELS[key] = (model, rows, catalog, given)
    return _MODELS[key][:2]


class ThroughputModel:
    """Builds the per-type throughput table for one workload from the store and the reference set."""

    def __init__(self, catalog: Catalog, facts: WorkloadFacts, workload_id: str, image_size: int = REFERENCE_IMAGE_SIZE,
                 measurements: list | None = None, now: datetime | None = None,
                 references: str | Path | ReferenceSet = BUILTIN):
        self.catalog = catalog
        self.facts = facts
        self.workload_id = workload_id
        self.image_size = image_size
        self.flops = facts.flops_per_sample(image_size)
        self.now = now or datetime.now(timezone.utc)
        self.measurements = measurements or []  # ProbeResults for this workload, newest first
        self.warnings: list[str] = []
        self._measured: dict[str, Any] = {}
        self._multi: dict[str, dict[int, float]] = {}
        # device key -> (the GPU's spec or the CPU's description, the newest probe of it off EC2)
        self._off_catalog: dict[str, tuple[acc.AcceleratorSpec | CpuHost, Any]] = {}
        self._cpu_too: dict[str, Any] = {}  # instance type -> its newest probe with a --cpu-too record
        self._index_measurements()
        self.use_references = isinstance(references, ReferenceSet) or str(references) != NONE
        self._on_type: dict[str, list] = {}  # instance type -> its published rows, in the set's order
        if self.use_references:
            self.model, rows = cross_device_model(references, catalog)
            for m in rows:
                self._on_type.setdefault(m.instance_type, []).append(m)
            measured = [self._as_measured(r) for r in self._measured.values()] + [
                self._off_ec2_measured(dev, r) for dev, r in self._off_catalog.values()]
        else:
            # None: the model's shape and the workload's level fitted on your probes alone; they
            # are its points, so they are not re-anchored on a second time.
            self.model = self._probes_model(facts)
            measured = []
        self.estimator = Estimator(self.model, catalog, facts.model, self.flops, measured, intensity=facts.intensity)
        self.max_instances = 4  # what an excluded transformer's "needs N instances" searches past (recommend sets it)
        self.pipeline_rate = self._pipeline_rate()
        self.host_floor = self._host_floor()

    # -- sources ---------------------------------------------------------------------------

    def _index_measurements(self) -> None:
        if not self.measurements:
            return
        newest = self.measurements[0]
        unused = 0
        unplaced: dict[str, int] = {}  # why a CPU probe off EC2 cannot be placed -> how many
        for r in self.measurements:
            if not r.instance_type or r.instance_type not in self.catalog.instance_types:
                if r.config.accelerator == "cpu":
                    dev, why = _off_catalog_cpu(r)
                    if dev is None:
                        unplaced[why] = unplaced.get(why, 0) + 1
                        continue
                else:
                    dev = _off_catalog_gpu(r)
                if dev is None:
                    unused += 1
                elif dev.key not in self._off_catalog:  # newest first: the newest per device model
                    self._off_catalog[dev.key] = (dev, r)
                continue
            if r.gpu_and_cpu is not None and r.config.num_nodes == 1:
                self._cpu_too.setdefault(r.instance_type, r)
            if r.config.num_nodes > 1:
                self._multi.setdefault(r.instance_type, {}).setdefault(r.config.num_nodes, r.samples_per_sec)
            elif r.instance_type not in self._measured:
                self._measured[r.instance_type] = r
        if unused:
            self.warnings.append(f"{unused} probe result(s) of this workload not used: no instance type of this "
                                 "catalog (probed off EC2 without --instance-type, or a type it does not list), "
                                 "and no single GPU whose model the advisor knows")
        for why, n in unplaced.items():
            self.warnings.append(f"{n} CPU probe result(s) of this workload off EC2 not used: {why}")
        gpus = sorted({r.hardware.gpus[0].name for d, r in self._off_catalog.values() if not isinstance(d, CpuHost)})
        if gpus:
            self.warnings.append(f"{len(gpus)} probe result(s) off EC2 used as measurements of their GPU "
                                 f"({', '.join(gpus)}): they re-anchor the estimates of every instance type; the host's CPUs, "
                                 "network and price are not known from them")
        cpus = sorted({_machine(d, r) for d, r in self._off_catalog.values() if isinstance(d, CpuHost)})
        if cpus:
            self.warnings.append(f"{len(cpus)} probe result(s) off EC2 used as measurements of their CPU "
                                 f"({', '.join(cpus)}; its peak from the fingerprint's cores x clock x ISA, as an "
                                 "instance type's): they re-anchor the estimates of every instance type; its memory "
                                 "system, the instance's network and price are not known from them")
        self._newest_versions = (newest.software.torch, newest.software.lightning)

    def _probes_model(self, facts: WorkloadFacts) -> CrossDeviceModel:
        """`--references none`: the cross-device model fitted on this workload's probes alone."""
        points = []
        probes = [(r, None) for r in self._measured.values()] + [(r, d) for d, r in self._off_catalog.values()]
        for r, off in probes:
            m = measured_from(r, self._devices_used(r), Efficiency(0.0, []))
            if off is not None:  # off EC2: the GPU or the CPU it measured
                dev = cpu_device(off, m.precision) if isinstance(off, CpuHost) else gpu_device(off, m.precision)
                where = f"{_machine(off, r)} (off EC2)"
            else:
                dev, where = instance_device(self.catalog.instance_types[m.instance_type], m.precision), m.instance_type
            if dev is not None:
                points.append(Point(dev, facts.model, m.precision, PROBE_STACK, m.per_device_sps, 1,
                                    f"probe {where}", "probe", f"probe|{facts.model}", m.reliable,
                                    1.0 if m.reliable else UNRELIABLE_WEIGHT))
        intensity = intensity_of(facts.model) or facts.intensity
        try:
            return from_probes(points, facts.model, intensity)
        except ValueError as e:
            raise ReferenceFileError(str(e)) from None

    def _off_ec2_measured(self, dev: acc.AcceleratorSpec | CpuHost, r) -> Measured:
        """A probe off EC2 as the estimator uses it: a measurement of its device, no instance type."""
        m = replace(self._as_measured(r), instance_type=None, machine=_machine(dev, r))
        return replace(m, cpu=dev) if isinstance(dev, CpuHost) else replace(m, gpu=dev)

    def _devices_used(self, r) -> int:
        return max(1, r.config.devices) if r.config.accelerator == "gpu" else 1

    def _as_measured(self, r) -> Measured:
        return measured_from(r, self._devices_used(r), self.model.efficiency)

    def _pipeline_rate(self) -> float | None:
        """Samples/s per vCPU of the data pipeline, from the newest probe that measured it."""
        for r in self.measurements:
            rate = getattr(r, "pipeline_samples_per_sec_per_worker", None)
            if rate:
                return float(rate)
        return None

    def _host_floor(self) -> HostFloor | None:
        """The host floor of a GPU step for this workload (estimate/host_floor.py), where a probe
        counted its ops; None otherwise (nothing changes then). A GPU probe that measured above the
        floor at its own batch raises it by as much: its host dispatched faster than the one the
        constants came from."""
        ops, batch, loader = self.facts.ops_per_step, self.facts.ops_batch, self.facts.ops_loader_rate
        if not ops or not batch:
            return None
        raised = 1.0
        for r in [*self._measured.values(), *(r for _, r in self._off_catalog.values())]:
            if r.config.accelerator == "gpu" and r.config.num_nodes == 1 and r.gpu_and_cpu is None:
                own = HostFloor(ops, r.config.batch_size, loader if r.config.num_workers == 0 else None)
                at = own.on_host(self._host_clock(r))[0]  # the floor at the probe's own host
                raised = max(raised, r.samples_per_sec / self._devices_used(r) / at)
        return HostFloor(ops, batch, loader, raised)

    def _host_clock(self, r) -> float | None:
        """A probe's host clock as the host floor reads one: the catalog's sustained clock of its
        instance type; off EC2 None (the fingerprint's is a nominal or momentary reading)."""
        it = self.catalog.instance_types.get(r.instance_type or "")
        return it.cpu_clock_ghz if it is not None else None

    def _measured_notes(self, r) -> list[str]:
        notes = []
        age = (self.now - r.finished_at).total_seconds() / 86400
        if age > STALE_DAYS:
            notes.append(f"measured {age:.0f} days ago")
        if (r.software.torch, r.software.lightning) != self._newest_versions:
            notes.append(f"measured with torch {r.software.torch}/lightning {r.software.lightning}, "
                         f"newest probe used {self._newest_versions[0]}/{self._newest_versions[1]}")
        return notes

    # -- per type --------------------------------------------------------------------------

    def evaluate(self, it: InstanceType, min_memory_gib: float | None = None,
                 require_dtype: str | None = None) -> Throughput | Exclusion:
        name = it.name
        measured = self._measured.get(name)
        kind = device_kind(it)
        if kind in ("neuron", "gaudi") and measured is None:
            sdk = "Neuron SDK" if kind == "neuron" else "SynapseAI (Habana) SDK"
            return Exclusion(name, f"{it.accelerator_model or kind} needs the {sdk}; the probe cannot drive it, "
                                   "so there is no number without your own measurement")
        if kind == "gpu" and measured is None and (why := undrivable_gpu(it)) is not None:
            return Exclusion(name, why)
        need = self.facts.memory_floor_gib(self.image_size)
        if min_memory_gib is not None:
            need = max(need, min_memory_gib)
        have = it.accelerator_memory_gib if kind != "cpu" else it.memory_gib
        if have is not None and have < need:
            what = "accelerator" if kind != "cpu" else "host"
            return Exclusion(name, f"{have:g} GiB {what} memory per device < {need:.3g} GiB needed")
        fits = self._memory_fit(it, kind, have)
        if isinstance(fits, Exclusion):
            return fits
        dtype = best_dtype(it)
        if require_dtype is not None:
            ok = (kind == "cpu" and require_dtype == "bf16" and dtype == "bf16") or (
                kind != "cpu" and (spec := gpu_spec(it)) is not None
                and getattr(spec, f"{require_dtype}_supported"))
            if not ok:
                return Exclusion(name, f"no native {require_dtype} on {it.accelerator_model or acc.cpu_model(it) or 'this CPU'}")
        if measured is not None:
            th = self._from_measurement(it, measured)
        elif (ref := self._reference(it)) is not None:
            th = self._from_reference(it, ref)
        else:
            th = self._estimate(it)
        if fits and not isinstance(th, Exclusion):
            th.notes.append(fits)
        if not isinstance(th, Exclusion) and it.accelerator_kind == "gpu":
            th.gpu_and_cpu = self._gpu_and_cpu(it, th)
        return th

    def _gpu_and_cpu(self, it: InstanceType, th: Throughput) -> gpu_and_cpu.GpuAndCpuGain | None:
        """The "GPU + CPU" gain on this type: its own --cpu-too probe's, else the model's (estimate/gpu_and_cpu.py)."""
        if it.name in self._cpu_too:
            return gpu_and_cpu.from_probe(self._cpu_too[it.name], th.samples_per_sec)
        grads, batch, per_vcpu, measured = self._gpu_and_cpu_inputs
        got = gpu_and_cpu.estimate(it, (th.samples_per_sec, th.low, th.high), batch, self.estimator.estimate,
                                   per_vcpu, grads, measured)
        return None if isinstance(got, str) else got

    @cached_property
    def _gpu_and_cpu_inputs(self) -> tuple[float, int, float | None, tuple[float, float, str] | None]:
        """The model's inputs that are the workload's and the probes', not a type's (worked out once):
        gradient bytes, batch per device, the pipeline's samples/s per vCPU, and (e, exchange GB/s,
        where) from the newest --cpu-too probe whose record says them."""
        grads = self.facts.gradient_bytes()
        measured, batch = None, self.facts.best_batch or DEFAULT_BATCH
        for name, r in self._cpu_too.items():  # the newest probe's e and exchange rate, on another type
            got = gpu_and_cpu.measured_inputs(r.gpu_and_cpu, grads)
            if got is not None:
                measured, batch = (*got, name), r.gpu_and_cpu.ranks[0].batch_size // max(1, self._devices_used(r))
                break
        images = self.facts.model in BUILTIN_MODELS
        per_vcpu = self.pipeline_rate or (default_rate_per_vcpu(self.image_size) if images else None)
        return grads, batch, per_vcpu, measured

    def _memory_fit(self, it: InstanceType, kind: str, have: float | None) -> Exclusion | str | None:
        """What the probe's memory fit says of this device: excluded when it cannot hold the
        workload at the smallest batch measured; a note when it holds less than the probe's best
        batch. Only where the fit was measured on the same kind of memory (a GPU's on GPUs, the
        process's on CPU instances)."""
        if self.facts.transformer is not None and kind == "gpu" and have is not None:
            return self._transformer_fit(it, have)
        fit = self.facts.memory
        if fit is None or have is None or (fit.where == "accelerator") != (kind != "cpu"):
            return None
        smallest = fit.points[0].batch_size
        need = fit.gib_at(smallest)
        device = (it.accelerator_model or "the device") if kind != "cpu" else "the host"
        if have < need:
            return Exclusion(it.name, f"needs {need:.1f} GiB at batch {smallest} ({fit.source_words()}); "
                                      f"{device} has {have:g}")
        best = self.facts.best_batch
        holds = fit.largest_batch(have)
        if best and holds is not None and holds < best:
            return (f"holds batch {holds} per device at most ({fit.source_words()}), "
                    f"below the probe's best {best}: expect less than its throughput per device")
        return None


    def _transformer_fit(self, it: InstanceType, have: float) -> Exclusion | str:
        """A transformer's fit on one instance of the type: the least costly strategy that holds
        it (a note saying which), else an exclusion saying what would (advisor/estimate/strategy.py)."""
        from .memory import Training
        from .strategy import device_of, plan, what_would_fit

        shape, seq = self.facts.transformer, self.facts.seq_len or 4096
        dev = device_of(it, have)
        if dev is None:
            return Exclusion(it.name, f"no 16-bit peak known for {it.accelerator_model or 'its GPU'}: "
                                      "the transformer's strategy search cannot rank it")
        measured = self.facts.measured_act_per_token_layer(seq)
        act = ("" if measured is None else
               f"; activations {measured:,.0f} bytes per token per layer as your probe measured them, not counted from the shape")
        p = plan(dev, shape, Training(), seq, 1, measured_act=measured)
        if p is None:
            # This ranking scales whole instances of a workload that fits on one; a type that needs
            # several sharded instances is ranked by the token path (recommend --model-shape).
            return Exclusion(it.name, what_would_fit(dev, shape, Training(), seq, self.max_instances, tried=1,
                                                     measured_act=measured)
                             + " (several sharded instances: rank them with recommend --model-shape)" + act)
        return (f"fits with {p.words}, micro-batch {p.micro_batch} x {seq} tokens "
                f"({p.memory.device_gib:.1f} GiB per device of {have:g}){act}")

    def _reference(self, it: InstanceType):
        """A published figure on this very instance type, all its devices, at the precision and the
        stack level the probe would reach (the final rung of a ladder, not an NCHW default run,
        which then informs the estimate instead, nor an MLPerf ceiling); the best one first, then the newest."""
        dtype = best_dtype(it)
        want = MIXED if device_kind(it) != "cpu" else (PRECISION_OF_DTYPE.get(dtype or "fp32"),)
        n = device_count(it)
        # A derived figure (worked out from other published numbers) is not a measurement: it is a
        # weak anchor of the fit (points.evidence_weight), so every size of its device tells one story.
        rows = [m for m in self._on_type.get(it.name, ()) if m.workload_id == self.workload_id
                and m.nodes == 1 and (m.gpus == n or device_kind(it) == "cpu") and m.precision in want
                and at_probe_stack(m) and not m.derived]
        return max(rows, key=lambda m: (m.tuned, m.source_date.isoformat() if m.source_date else ""), default=None)

    def _finish(self, it: InstanceType, per_dev: float, low_f: float, high_f: float, source: str,
                precision: str, basis: dict, notes: list[str], whole_instance: float | None = None,
                anchor: str | None = None) -> Throughput:
        n = device_count(it)
        step, intra, eff_ar, ic_words = intra_instance(n, interconnect(it), per_dev, self.facts.gradient_bytes())
        eff = min(eff_ar, self.model.efficiency(n)) if n > 1 else 1.0
        sps = whole_instance if whole_instance is not None else n * per_dev * eff
        gbps, net_note = sustained_network_gbps(it)
        if gbps:
            # What the scale-out model uses between instances.
            basis = {**basis, "network_gbps_used": gbps}
            if net_note:
                basis["network_note"] = net_note
        if n > 1:
            basis = {**basis, "devices": n, "interconnect": ic_words,
                     "intra_instance_efficiency": round(eff, 4) if whole_instance is None else "measured",
                     "intra_instance_rule": "min(published n-GPU scaling, all-reduce model over the interconnect)"}
            if whole_instance is None:
                # A machine strays from the published scaling rule by this much per doubling.
                spread = math.exp(self.model.efficiency.spread() * math.log2(n))
                low_f, high_f = low_f / spread, high_f * spread
        return Throughput(it.name, sps, sps * low_f, sps * high_f, source, precision, n, step, intra,
                          basis, notes, self._multi.get(it.name, {}), anchor=anchor,
                          intra_efficiency=eff if whole_instance is None else 1.0, network_note=net_note if gbps else None)

    def _from_measurement(self, it: InstanceType, r) -> Throughput:
        n = device_count(it)
        devices_used = self._devices_used(r)
        per_dev = r.samples_per_sec / devices_used
        lo, hi = r.samples_per_sec_ci
        notes = self._measured_notes(r)
        if notes:
            self.warnings.append(f"{it.name}: " + "; ".join(notes) + " (probe it again to refresh)")
        basis = {"result_id": r.result_id, "measured_by": r.source, "finished_at": r.finished_at.isoformat(),
                 "config": r.config.model_dump(), "torch": r.software.torch, "lightning": r.software.lightning}
        if r.source == "training run":  # a measurement like a probe's, of the configuration as trained
            notes.append(f"measured in your training run ({r.config.precision}, batch {r.config.batch_size}; no ladder tried)")
        low_f, high_f = lo / r.samples_per_sec, hi / r.samples_per_sec
        if not getattr(r, "reliable", True):
            reasons = list(getattr(r, "unreliable_reasons", []) or []) or ["the probe did not say why"]
            basis["reliable"] = False
            basis["unreliable_reasons"] = reasons
            notes.append(f"probe not reliable ({'; '.join(reasons)}): band widened to the estimate without it")
            # What the other probes and the references say about this type, without this probe.
            others = [m for m in self.estimator.measured if m.instance_type != it.name]
            alt = self.estimator.with_measurements(others).estimate(it)
            if not isinstance(alt, str):
                low_f = min(low_f, alt.low / per_dev)
                high_f = max(high_f, alt.high / per_dev)
                basis["estimate_without_this_probe"] = {"per_device": round(alt.per_device, 2),
                                                        "low": round(alt.low, 2), "high": round(alt.high, 2)}
            else:
                low_f, high_f = min(low_f, 0.5), max(high_f, 2.0)
                basis["estimate_without_this_probe"] = alt
        whole = r.samples_per_sec if devices_used >= n else None
        if whole is None:
            notes.append(f"probe used {devices_used} of {n} devices; scaled with the published n-GPU efficiency")
        return self._finish(it, per_dev, low_f, high_f, "measured", r.config.precision, basis, notes, whole)

    def _from_reference(self, it: InstanceType, m) -> Throughput:
        u = m.uncertainty
        n = device_count(it)
        basis = {"reference_row": m.id, "source": m.source.label(), "where": m.source.where,
                 "source_date": m.source_date.isoformat() if m.source_date else None, "stack": m.stack, "framework": m.framework,
                 "derived": m.derived}
        return self._finish(it, m.samples_per_sec / n, 1 - u, 1 + u, "reference", m.precision, basis, [],
                            whole_instance=m.samples_per_sec)

    def _estimate(self, it: InstanceType) -> Throughput | Exclusion:
        est = self.estimator.estimate(it)
        if isinstance(est, str):
            return Exclusion(it.name, est)
        basis, notes = dict(est.basis), list(est.notes)
        if self.image_size != REFERENCE_IMAGE_SIZE:
            basis["image_size_note"] = (f"FLOPs scaled by (image_size/{REFERENCE_IMAGE_SIZE})^2 = "
                                        f"{(self.image_size / REFERENCE_IMAGE_SIZE) ** 2:.3g}")
        spec = gpu_spec(it)
        if spec is not None and spec.uncertain:
            basis["uncertain_spec_fields"] = list(spec.uncertain)
        if it.accelerator_fraction:
            basis["device_share"] = it.accelerator_fraction
        per, low, high = est.per_device, est.low, est.high
        anchor = self._anchor_words(est)
        if it.accelerator_kind == "gpu" and self.host_floor is not None:
            # One GPU's step is the longer of the roofline's and the host's dispatch of its ops.
            per, low, high, binds = self.host_floor.apply(per, low, high, it.cpu_clock_ghz)
            basis["host_floor"] = self.host_floor.basis(binds, "the newest probe of this workload that counted them",
                                                        it.cpu_clock_ghz)
            if binds:
                notes.insert(0, self.host_floor.note(it.cpu_clock_ghz))
                anchor = "the host floor (your probe's op count, our H100 host's per-op time at this host's clock)"
        th = self._finish(it, per, low / per, high / per, "estimated",
                          est.precision, basis, notes, anchor=anchor)
        cap = host_cap(it, self.image_size, self.pipeline_rate, images=self.facts.model in BUILTIN_MODELS)
        th.samples_per_sec, th.low, th.high, binds = apply_cap(th.samples_per_sec, th.low, th.high, cap)
        if cap is not None and (binds or th.high >= cap["max_samples_per_sec"]):
            th.basis["host_cap"] = {**cap, "max_samples_per_sec": round(cap["max_samples_per_sec"])}
        if binds:
            # The step is as slow as the host feeds it: the scale-out model must see that step time.
            th.step_seconds = DEFAULT_BATCH * th.devices / th.samples_per_sec
            th.notes.append(f"capped by the host ({cap['binding']}): {cap['max_samples_per_sec']:,.0f}/s")
        return th

    def _anchor_words(self, est) -> str:
        probes = est.basis.get("probes")
        if probes:
            best = max(probes, key=lambda p: p["weight"])
            where = best["instance_type"] or f"{best['machine']} (off EC2)"  # as Measured.where
            return f"your {where} probe"
        return f"{self.model.fit.rows} published figures"


def _off_catalog_cpu(r) -> tuple[CpuHost | None, str]:
    """The host CPU a CPU probe off EC2 measured (its fingerprint's), or None and why not: a
    single-node probe whose fingerprint says cores, clock and ISA (points.fingerprint_cpu_host)."""
    if r.config.num_nodes > 1:
        return None, "a multi-node probe off EC2 is not one device"
    # The measured matmul covers the whole machine on a CPU (run/assemble.py: devices_in_peak 1).
    return fingerprint_cpu_host(r.hardware, r.config.precision, r.peak_tflops_matmul)


def _machine(dev: acc.AcceleratorSpec | CpuHost, r) -> str:
    """A probe's machine off EC2 in words: its GPU as the machine named it, or its CPU and cores."""
    if isinstance(dev, CpuHost):
        return f"{dev.cores}-core {cpu_name(r.hardware.cpu_model)}"
    return r.hardware.gpus[0].name


def _off_catalog_gpu(r) -> acc.AcceleratorSpec | None:
    """The GPU a probe off EC2 measured, when that is one device the advisor has peaks for: a
    single-node probe on GPUs of one known model (a multi-GPU one is divided as on EC2)."""
    gpus = r.hardware.gpus if r.hardware is not None else []
    if r.config.accelerator != "gpu" or r.config.num_nodes > 1 or not gpus or len({g.name for g in gpus}) > 1:
        return None
    spec = acc.lookup(gpus[0].name, gpus[0].memory_gib)
    return spec if spec is not None and spec.kind == "gpu" else None

"""How fast one instance of each type trains the workload, and where that number comes from.

Order of trust, per instance type:
1. `measured`: the user's newest probe of this workload on this type (results store).
2. `reference`: a published, tuned figure for this workload (advisor/data/reference_measurements.json).
3. `estimated`: the nearest measured/reference anchor, scaled by the ratio of the devices' peak
   FLOP/s at the precision each would train in (bf16, else fp16, else fp32), i.e. assuming the
   target reaches the anchor's utilisation of its peak. The band widens with distance from the
   anchor; every estimate carries its basis.
Types the workload cannot run on are returned as exclusions with the reason.

Multi-device instances: instance throughput = devices x per-device x efficiency, the efficiency
from the all-reduce model in advisor.scaling with the instance's interconnect (catalog.hardware).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

from catalog import accelerators as acc
from catalog.hardware import (
    HOST_LINK,
    PCIE4,
    SOCKET_VCPUS,
    best_dtype,
    device_count,
    device_kind,
    device_peak_tflops,
    gpu_spec,
    interconnect,
    sustained_network_gbps,
)
from catalog.models import Catalog, InstanceType
from lightning_module.workload_facts import FACTS, WorkloadFacts

from .references import load_references
from .scaling import intra_instance

log = logging.getLogger(__name__)

STALE_DAYS = 30

# Band half-widths as multiplicative factors (low = x / f, high = x * f), by distance from the
# anchor. Judgement calls, not measurements: the articles show 4.5x between a naive and a tuned
# run on one machine, so even "same model" carries 30%; a CPU<->GPU jump crosses software stacks.
BAND_SAME_MODEL = 1.3
BAND_SAME_CLASS = 1.75
BAND_OTHER_CLASS = 2.5
BAND_CPU_GPU = 3.5
BAND_OTHER_WORKLOAD = 1.5  # extra factor when the anchor measured a different model

_PRECISION_OF = {"bf16": "bf16-mixed", "fp16": "16-mixed", "fp32": "32-true"}
_DTYPE_OF = {v: k for k, v in _PRECISION_OF.items()}


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


@dataclass
class Exclusion:
    instance_type: str
    reason: str


@dataclass
class Anchor:
    """A measured or published point an estimate can scale from."""

    instance: InstanceType
    per_device_sps: float
    precision: str
    source: str
    workload_id: str
    utilisation: float  # of the device's (or the CPU's) peak at `precision`
    label: str
    flops_anchor: float  # FLOPs per sample of the workload the anchor ran


@lru_cache(maxsize=1)
def reference_measurements() -> list[dict[str, Any]]:
    """The seeds' ladder rows (those with an instance type and a rung) in the shape this module
    has always read; the estimator that uses the whole dataset replaces this adapter."""
    return [
        {"instance_type": m.instance_type, "workload_id": m.workload_id,
         "accelerator": "cpu" if m.device == "cpu" else "gpu", "rung": m.rung, "tuned": m.tuned,
         "precision": m.precision, "samples_per_sec": m.samples_per_sec,
         "relative_uncertainty": m.uncertainty, "torch": m.torch_version,
         "provenance": m.provenance}
        for m in load_references().measurements if m.instance_type and m.rung
    ]


def distance(anchor: InstanceType, target: InstanceType) -> tuple[int, float, str]:
    """(rank, band factor, words): same device model < same vendor/class < other class < CPU<->GPU."""
    ka, kt = device_kind(anchor), device_kind(target)
    if (ka == "cpu") != (kt == "cpu"):
        return 3, BAND_CPU_GPU, "CPU<->accelerator"
    if ka == "cpu":
        ma, mt = acc.cpu_model(anchor), acc.cpu_model(target)
        if anchor.family == target.family or (ma is not None and ma == mt):
            return 0, BAND_SAME_MODEL, "same CPU model"
        va, vt = acc.cpu_manufacturer(anchor), acc.cpu_manufacturer(target)
        if va is not None and vt is not None and va.lower() == vt.lower() and anchor.arch == target.arch:
            return 1, BAND_SAME_CLASS, "same CPU vendor"
        return 2, BAND_OTHER_CLASS, "other CPU vendor/architecture"
    sa, st = gpu_spec(anchor), gpu_spec(target)
    if sa is not None and st is not None and sa.key == st.key:
        return 0, BAND_SAME_MODEL, "same accelerator model"
    if sa is not None and st is not None and sa.vendor == st.vendor and sa.kind == st.kind:
        return 1, BAND_SAME_CLASS, "same accelerator vendor"
    return 2, BAND_OTHER_CLASS, "other accelerator class"


class ThroughputModel:
    """Builds the per-type throughput table for one workload from the store and the reference file."""

    def __init__(self, catalog: Catalog, facts: WorkloadFacts, workload_id: str, image_size: int = 224,
                 measurements: list | None = None, now: datetime | None = None):
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
        self._index_measurements()
        self.anchors = self._anchors()

    # -- sources ---------------------------------------------------------------------------

    def _index_measurements(self) -> None:
        if not self.measurements:
            return
        newest = self.measurements[0]
        for r in self.measurements:
            if not r.instance_type:
                continue
            if r.config.num_nodes > 1:
                self._multi.setdefault(r.instance_type, {}).setdefault(r.config.num_nodes, r.samples_per_sec)
            elif r.instance_type not in self._measured:
                self._measured[r.instance_type] = r
        self._newest_versions = (newest.software.torch, newest.software.lightning)

    def _measured_notes(self, r) -> list[str]:
        notes = []
        age = (self.now - r.finished_at).total_seconds() / 86400
        if age > STALE_DAYS:
            notes.append(f"measured {age:.0f} days ago")
        if (r.software.torch, r.software.lightning) != self._newest_versions:
            notes.append(f"measured with torch {r.software.torch}/lightning {r.software.lightning}, "
                         f"newest probe used {self._newest_versions[0]}/{self._newest_versions[1]}")
        return notes

    def _utilisation(self, it: InstanceType, per_device_sps: float, dtype: str, flops: float) -> float | None:
        peak = device_peak_tflops(it, dtype)
        if not peak:
            return None
        return per_device_sps * flops / (peak * 1e12)

    def _anchors(self) -> list[Anchor]:
        out: list[Anchor] = []
        types = self.catalog.instance_types
        for name, r in self._measured.items():
            it = types.get(name)
            if it is None:
                continue
            dev = max(1, r.config.devices) if r.config.accelerator == "gpu" else 1
            per_dev = r.samples_per_sec / dev
            dtype = _DTYPE_OF.get(r.config.precision, "fp32")
            flops = r.flops_per_sample or self.flops
            u = self._utilisation(it, per_dev, dtype, flops)
            if u:
                out.append(Anchor(it, per_dev, r.config.precision, "measured", self.workload_id, u,
                                  f"your probe of {name} ({r.samples_per_sec:.4g} samples/s, {r.config.precision})",
                                  flops))
        refs = [m for m in reference_measurements() if m["tuned"]]
        same = [m for m in refs if m["workload_id"] == self.workload_id]
        # Published figures exist only for ResNet-50: other workloads borrow their utilisation
        # (FLOPs differ, the device's ability to keep its units busy carries over roughly).
        for m in same or refs:
            it = types.get(m["instance_type"])
            if it is None or m["instance_type"] in self._measured:
                continue
            dtype = _DTYPE_OF.get(m["precision"], "fp32")
            ref_model = m["workload_id"].split("-")[0]
            flops = FACTS[ref_model].train_flops_per_sample if ref_model in FACTS else self.flops
            u = self._utilisation(it, m["samples_per_sec"] / device_count(it), dtype, flops)
            if u:
                out.append(Anchor(it, m["samples_per_sec"] / device_count(it), m["precision"], "reference",
                                  m["workload_id"], u, f"published {m['instance_type']} {m['samples_per_sec']:g} samples/s ({m['workload_id']}, {m['rung']})",
                                  flops))
        return out

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
        need = self.facts.memory_floor_gib(self.image_size)
        if min_memory_gib is not None:
            need = max(need, min_memory_gib)
        have = it.accelerator_memory_gib if kind != "cpu" else it.memory_gib
        if have is not None and have < need:
            what = "accelerator" if kind != "cpu" else "host"
            return Exclusion(name, f"{have:g} GiB {what} memory per device < {need:.3g} GiB needed")
        dtype = best_dtype(it)
        if require_dtype is not None:
            ok = (kind == "cpu" and require_dtype == "bf16" and dtype == "bf16") or (
                kind != "cpu" and (spec := gpu_spec(it)) is not None
                and getattr(spec, f"{require_dtype}_supported"))
            if not ok:
                return Exclusion(name, f"no native {require_dtype} on {it.accelerator_model or acc.cpu_model(it) or 'this CPU'}")
        if measured is not None:
            return self._from_measurement(it, measured)
        ref = self._reference(name)
        if ref is not None:
            return self._from_reference(it, ref)
        if dtype is None:
            return Exclusion(name, f"unknown accelerator {it.accelerator_model!r}: no peak figures to estimate from")
        return self._estimate(it, dtype)

    def _reference(self, name: str) -> dict | None:
        for m in reference_measurements():
            if m["instance_type"] == name and m["workload_id"] == self.workload_id and m["tuned"]:
                return m
        return None

    def _finish(self, it: InstanceType, per_dev: float, low_f: float, high_f: float, source: str,
                precision: str, basis: dict, notes: list[str], whole_instance: float | None = None,
                anchor: str | None = None) -> Throughput:
        step, intra, eff, ic_words = intra_instance(device_count(it), interconnect(it), per_dev, self.facts.gradient_bytes())
        n = device_count(it)
        sps = whole_instance if whole_instance is not None else n * per_dev * eff
        gbps, net_note = sustained_network_gbps(it)
        if gbps:
            # What the scale-out model uses between instances.
            basis = {**basis, "network_gbps_used": gbps}
            if net_note:
                basis["network_note"] = net_note
        if n > 1:
            basis = {**basis, "devices": n, "interconnect": ic_words,
                     "intra_instance_efficiency": round(eff, 4) if whole_instance is None else "measured"}
        return Throughput(it.name, sps, sps * low_f, sps * high_f, source, precision, n, step, intra,
                          basis, notes, self._multi.get(it.name, {}), anchor=anchor,
                          intra_efficiency=eff if whole_instance is None else 1.0, network_note=net_note if gbps else None)

    def _from_measurement(self, it: InstanceType, r) -> Throughput:
        n = device_count(it)
        devices_used = max(1, r.config.devices) if r.config.accelerator == "gpu" else 1
        per_dev = r.samples_per_sec / devices_used
        lo, hi = r.samples_per_sec_ci
        notes = self._measured_notes(r)
        if notes:
            self.warnings.append(f"{it.name}: " + "; ".join(notes) + " (probe it again to refresh)")
        basis = {"result_id": r.result_id, "finished_at": r.finished_at.isoformat(),
                 "config": r.config.model_dump(), "torch": r.software.torch, "lightning": r.software.lightning}
        whole = r.samples_per_sec if devices_used >= n else None
        if whole is None:
            notes.append(f"probe used {devices_used} of {n} devices; scaled with the interconnect model")
        return self._finish(it, per_dev, lo / r.samples_per_sec, hi / r.samples_per_sec, "measured",
                            r.config.precision, basis, notes, whole)

    def _from_reference(self, it: InstanceType, m: dict) -> Throughput:
        u = m["relative_uncertainty"]
        n = device_count(it)
        basis = {"provenance": m["provenance"], "rung": m["rung"], "torch": m.get("torch")}
        return self._finish(it, m["samples_per_sec"] / n, 1 - u, 1 + u, "reference", m["precision"], basis, [],
                            whole_instance=m["samples_per_sec"])

    def _estimate(self, it: InstanceType, dtype: str) -> Throughput | Exclusion:
        if math.isnan(self.flops):
            return Exclusion(it.name, "not measured, and no FLOPs per sample for this workload to estimate from "
                                      "(probes record it where torch's flop counter can count the model)")
        peak = device_peak_tflops(it, dtype)
        if not peak:
            return Exclusion(it.name, "no peak FLOP/s figure for this device (CPU clock or accelerator spec missing)")
        if not self.anchors:
            return Exclusion(it.name, "nothing measured or published to estimate from")
        scored = []
        for a in self.anchors:
            rank, f, words = distance(a.instance, it)
            other_wl = a.workload_id != self.workload_id
            # Prefer the user's own measurements at equal distance: they ran this software stack.
            scored.append((rank, other_wl, a.source != "measured", f, words, a))
        scored.sort(key=lambda s: s[:3])
        rank, other_wl, _, f, words, a = scored[0]
        if other_wl:
            f *= BAND_OTHER_WORKLOAD
        a_peak = device_peak_tflops(a.instance, _DTYPE_OF.get(a.precision, "fp32")) or peak
        ratio = peak / a_peak
        socket_share = socket_share_a = 1.0
        if device_kind(it) == "cpu" and it.family in SOCKET_VCPUS:
            socket_share = min(1.0, SOCKET_VCPUS[it.family] / it.vcpus)
        if device_kind(a.instance) == "cpu" and a.instance.family in SOCKET_VCPUS:
            socket_share_a = min(1.0, SOCKET_VCPUS[a.instance.family] / a.instance.vcpus)
        ratio = ratio * socket_share / socket_share_a
        per_dev = a.per_device_sps * ratio  # = anchor utilisation x this peak / FLOPs per sample
        bw_ratio = None
        sa, st = gpu_spec(a.instance), gpu_spec(it)
        if sa is not None and st is not None and sa.bandwidth_gbs and st.bandwidth_gbs:
            bw_ratio = st.bandwidth_gbs / sa.bandwidth_gbs
            # Roofline correction: the normalisation/activation layers of a training step are
            # memory-bound, so a device with more FLOP/s but relatively less bandwidth than the
            # anchor cannot keep the anchor's utilisation. Take the smaller of the two ratios.
            per_dev = a.per_device_sps * min(ratio, bw_ratio)
        if other_wl:
            per_dev *= a.flops_anchor / self.flops
        low_f = 1 / f
        high_f = f / socket_share  # if the second socket did help after all
        ingest = None
        if device_kind(it) == "gpu":
            link_words, link_gbs = HOST_LINK.get(it.family, PCIE4)
            input_bytes = 3 * self.image_size**2  # uint8 RGB, as the probe's DataModule feeds it
            cap = link_gbs * 1e9 / input_bytes
            if per_dev * high_f > cap:
                mid, high = min(per_dev, cap), cap
                # The link is an upper bound only: below it the estimate stays as unsure as before.
                low = per_dev * low_f if per_dev * low_f < cap else cap * low_f
                per_dev, low_f, high_f = mid, low / mid, high / mid
                ingest = {"link": link_words, "input_bytes_per_sample": input_bytes,
                          "max_samples_per_sec_per_device": round(cap)}
        basis = {
            "anchor": a.instance.name, "anchor_source": a.source, "anchor_detail": a.label,
            "anchor_utilisation": round(a.utilisation, 4), "distance": words,
            "precision": _PRECISION_OF[dtype], "peak_tflops": round(peak, 2),
            "anchor_peak_tflops": round(a_peak, 2), "peak_ratio": round(ratio, 3),
            "bandwidth_ratio": None if bw_ratio is None else round(bw_ratio, 3),
            "flops_per_sample": self.flops, "band_factor": round(f, 3),
            "rule": "per-device samples/s = anchor per-device samples/s x min(peak FLOP/s ratio, memory "
                    "bandwidth ratio (GPUs only)) x anchor FLOPs per sample / this workload's FLOPs per sample",
        }
        if other_wl:
            basis["workload_note"] = f"anchor measured {a.workload_id}; utilisation assumed to carry over"
        if self.image_size != 224:
            basis["image_size_note"] = f"FLOPs scaled by (image_size/224)^2 = {(self.image_size / 224) ** 2:.3g}"
        if socket_share < 1:
            basis["socket_note"] = (f"{it.vcpus} vCPUs = {it.vcpus / SOCKET_VCPUS[it.family]:g} sockets; counted one "
                                    "(Article A: DDP across a c6i.32xlarge's 2 NUMA nodes did not raise throughput)")
        spec = gpu_spec(it)
        if spec is not None and spec.uncertain:
            basis["uncertain_spec_fields"] = list(spec.uncertain)
        notes = []
        if ingest is not None:
            basis["ingest_bound"] = ingest
            notes.append(f"capped by the host link ({ingest['link'].split(' (')[0]}): "
                         f"{ingest['max_samples_per_sec_per_device']:,}/s per GPU")
        return self._finish(it, per_dev, low_f, high_f, "estimated", _PRECISION_OF[dtype], basis, notes,
                            anchor=a.instance.name)

"""From a ranked plan (the candidates, the per-type throughputs and bands, the offers) to what the
value model needs: per candidate its cost split, per type its band, its sibling group and what
one probe of it costs, where, and for how long.

The adapter between the estimator and the plan: where the estimator says how sure it is (the
band's coverage, what a sibling's measurement leaves), this is the one place that reads it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from catalog import accelerators as acc
from catalog.hardware import device_count
from catalog.models import InstanceType
from lightning_module.contract import ladder
from lightning_module.contract import options as probe_defaults
from lightning_module.contract.result import WorkloadSpec

from ... import ec2
from ...estimate.band import band_z, split_normal_sds
from ...estimate.calibrate import NEW_KIND, pair_distance
from ...estimate.points import instance_device
from .. import rank as rk
from .probetime import DeviceClass, PastProbes, type_class
from .value import Beliefs, Economics

# One probe's measurement: `advisor probe` times each rung until its 95% CI is within
# --target-ci (default 3%), so the result's log-sd is about log(1.03) / 1.96.
PROBE_TARGET_CI = probe_defaults.TARGET_CI
PROBE_NOISE_SD = math.log1p(PROBE_TARGET_CI) / 1.96
# The band recommend gives a measured type is its CI (advisor.estimate.throughput), read as every
# band is (advisor.estimate.band): the log-sd below the figure once a probe has measured it.
PROBE_SD_LOW = math.log1p(PROBE_TARGET_CI) / band_z()

# How long one probe runs (and bills) where the store holds no past probe of the workload on the
# device class (probetime.py reads those), from what `advisor launch` + `advisor probe` do:
# - start-up: boot, ~29 s from RunInstances to SSH on a Linux AMI (ec2-boot-bench, Colin
#   Percival, https://www.daemonology.net/blog/2021-08-12-EC2-boot-time-benchmarking.html),
#   and the pip install the user-data runs (lightning, boto3, pydantic, tabulate and their
#   small dependencies without torch, which the AMI has): 19.5 s measured on this project's
#   2-core build machine with no pip cache. Derived: 50 s.
STARTUP_SECONDS = 29.0 + 19.5
# - the ladder's rungs (lightning_module.contract.ladder.measured_rungs: baseline, the tuning
#   rungs, one per loader worker count the vCPUs allow, the batch search's first two sizes; on a
#   CPU type one per intra-op thread count below its vCPUs'). Each
#   measurement is its warm-up steps plus timed steps until the CI target or --max-seconds (60 s);
#   priced at that bound, since no GPU ladder has been timed on the project. torch.compile: at
#   most --compile-timeout (300 s).
WARMUP_STEPS = probe_defaults.WARMUP_STEPS  # advisor probe --warmup-steps default
MAX_SECONDS = probe_defaults.MAX_SECONDS  # advisor probe --max-seconds default
COMPILE_SECONDS = probe_defaults.COMPILE_TIMEOUT  # advisor probe --compile-timeout default
START_BATCH = WorkloadSpec.model_fields["batch_size"].default  # advisor probe --start-batch-size default
# `advisor launch`'s watchdog: no probe instance bills past --max-minutes.
WATCHDOG_MINUTES = ec2.MAX_MINUTES
# `advisor launch` refuses more instances than --max-instances in one go.
MAX_PROBES = ec2.MAX_INSTANCES
# Worlds the plan's expectations are taken over: the value of the best probe moves by a few
# percent between seeds at 256 (tests/packages/advisor/recommend/test_probeplan.py), well inside what separates a probe
# worth taking from one that is not; 256 keeps recommend's plan under ~0.1 s.
DRAWS = 256


def probe_seconds(per_device_sps: float, vcpus: int, cpu: bool = False) -> float:
    """Billed seconds of one probe of a type training at per_device_sps (the ladder at its bound;
    `cpu`: a CPU type, whose ladder also tries thread counts)."""
    step = START_BATCH / per_device_sps if per_device_sps > 0 else math.inf
    per = WARMUP_STEPS * step + max(MAX_SECONDS, 2 * step)
    return STARTUP_SECONDS + ladder.measured_rungs(vcpus, cpu) * per + COMPILE_SECONDS


@dataclass(frozen=True)
class ProbeTime:
    seconds: float
    basis: str  # what the figure rests on, in words (shown with the plan)


def probe_time(it: InstanceType, per_device_sps: float, past: PastProbes) -> ProbeTime:
    """One probe of `it`: the store's past probes of the workload on its device class (their median
    seconds a rung, x the rungs this type's ladder measures, + start-up), else the ladder's bound
    (probe_seconds), said to be so. Never under the steps a rung must time on this type."""
    found = past.per_rung(it)
    if found is None:
        kind = DeviceClass(type_class(it).kind, None).words()
        return ProbeTime(probe_seconds(per_device_sps, it.vcpus, it.accelerator_kind == "none"),
                         f"no past probe of this workload on {kind} in the store: the ladder's bound "
                         "(every rung to --max-seconds, torch.compile to --compile-timeout)")
    step = START_BATCH / per_device_sps if per_device_sps > 0 else math.inf
    per = max(found.seconds, (WARMUP_STEPS + 2) * step)  # a slower device's steps are longer
    rungs = ladder.measured_rungs(it.vcpus, it.accelerator_kind == "none")
    return ProbeTime(STARTUP_SECONDS + rungs * per,
                     f"from {found.words()} in the store: median {per:.0f} s a rung x {rungs} rungs "
                     f"+ {STARTUP_SECONDS:.0f} s start-up (derived)")


def sibling_key(it: InstanceType) -> str:
    """One device in other sizes: the family and its accelerator (the CPU family for CPUs)."""
    if it.accelerator_kind == "none":
        return it.family
    spec = acc.lookup(it.accelerator_model or "", it.accelerator_memory_gib)
    return f"{it.family}/{spec.key if spec else it.accelerator_model}"


@dataclass
class ProbeOffer:
    """Where one probe of a type runs: its cheapest single instance in the user's regions and markets."""

    offer: int  # index into the OfferTable
    usd_per_hour: float
    hours: float
    hours_basis: str = ""  # what the probe's duration rests on, in words (probetime.ProbeTime.basis)

    @property
    def usd(self) -> float:
        return self.usd_per_hour * self.hours


def economics(c: rk.Candidates, offers: rk.OfferTable, job: rk.Job, objective: str,
              after_sd_low: list[np.ndarray] = ()) -> Economics:
    """Each candidate's cost and hours split as advisor.recommend.spot states them: setup (billed,
    not training) is the fixed part, the rest scales with 1 / throughput; a candidate with no
    figure (NaN: network unknown for k > 1) never fits. At a confidence, also the figures recommend
    decides on (cost_q, hours_q) with the band as it stands and, per band state after probes
    (value.MEASURED, value.SIBLING), with the per-type log-sd below the figure `after_sd_low` gives."""
    bad = ~(np.isfinite(c.cost) & np.isfinite(c.hours_pess))
    setup_cost = np.where(bad, 0.0, job.setup_hours * c.billed * offers.price[c.offer])
    setup_h = np.where(bad, 0.0, job.setup_hours)
    var = lambda total, fix: np.where(bad, np.inf, total - fix)
    decide = more = None
    if job.confidence:
        pess = var(c.hours_q, setup_h)
        decide = {"cost": var(c.cost_q, setup_cost)[None, :], "pess": pess[None, :], "hours": pess[None, :]}

        def more(idx: np.ndarray) -> dict[str, np.ndarray]:
            # The states after probes, only for the candidates the plan keeps (a few thousand of 1M).
            with np.errstate(divide="ignore", invalid="ignore"):
                t0 = job.samples / 3600.0 / c.samples_per_sec
            hours, cost = [], []
            for sd in after_sd_low:
                h, co = rk.at_confidence(t0, sd, c.type_idx, c.k, c.billed, offers, job, cand=idx)
                hours.append(np.where(bad[idx], np.inf, h - setup_h[idx]))
                cost.append(np.where(bad[idx], np.inf, co - setup_cost[idx]))
            return {"cost": np.array(cost).reshape(len(cost), len(idx)),
                    "pess": np.array(hours).reshape(len(hours), len(idx)),
                    "hours": np.array(hours).reshape(len(hours), len(idx))}
    return Economics(type_idx=c.type_idx, cost_fix=setup_cost, cost_var=var(c.cost, setup_cost),
                     hours_fix=setup_h, hours_var=var(c.hours, setup_h), pess_fix=setup_h,
                     pess_var=var(c.hours_pess, setup_h), budget_usd=job.budget_usd, deadline_hours=job.deadline_hours,
                     objective=objective, decide=decide, decide_more=more)


def probe_offers(types: rk.TypeTable, offers: rk.OfferTable, instance_types: list[InstanceType],
                 past: PastProbes | None = None) -> list[ProbeOffer | None]:
    """Per type: the cheapest one-instance offer (on-demand or spot, as the user asked; not the
    spot-with-fallback rows) and the probe's duration (from the store's past probes of the
    workload, `past`, else the ladder's bound); None for a measured type, no offer, or a probe
    that would not finish within `advisor launch`'s watchdog."""
    past = past or PastProbes((), {})
    out: list[ProbeOffer | None] = [None] * len(types.names)
    direct = np.flatnonzero(offers.market != rk.FALLBACK)
    # What one instance costs an hour: nothing where the team already pays for one (--prices reserved).
    one = offers.price * offers.billed(np.ones(1))[:, 0]
    # Per type its cheapest direct offer, the first listed among equals (as argmin answers, which
    # answers a NaN price first): one stable sort, not a scan of every offer per type.
    price = one[direct]
    order = direct[np.lexsort((price, ~np.isnan(price), offers.type_idx[direct]))]
    first = order[np.r_[True, offers.type_idx[order][1:] != offers.type_idx[order][:-1]]] if len(order) else order
    cheapest = dict(zip(offers.type_idx[first].tolist(), first.tolist()))
    for t, it in enumerate(instance_types):
        if types.source[t] == 0:  # measured already
            continue
        o = cheapest.get(t)
        if o is None:
            continue
        devices = device_count(it)
        took = probe_time(it, float(types.samples_per_sec[t]) / max(devices, 1), past)
        if took.seconds > WATCHDOG_MINUTES * 60:
            continue  # its ladder would not finish before launch's watchdog stops it: no result
        out[t] = ProbeOffer(o, float(one[o]), took.seconds / 3600.0, took.basis)
    return out


def probe_band_scale(estimator) -> float:
    """The log half-width of an estimate re-anchored by a probe at distance 0 (a sibling's). A
    reference set with no pair of devices in one suite cannot calibrate it: then a probe is taken
    to tell no more than the references do."""
    bands = estimator.model.bands
    return bands.probe_scale if math.isfinite(bands.probe_scale) else bands.model_scale


def after_probe_sds(types: rk.TypeTable, estimator) -> list[np.ndarray]:
    """Per type, the band's log-sd below the figure once probes are in (value.MEASURED: measured
    itself, its CI; value.SIBLING: re-anchored by a probe of its device in another size, the
    estimator's band after a probe, never wider than now). Other devices re-anchored by a probe
    keep their band here (they narrow less, by distance: left out, the conservative side)."""
    sd_now = types.sd_low
    return [np.full(len(sd_now), PROBE_SD_LOW), np.minimum(sd_now, probe_band_scale(estimator) / band_z())]


def beliefs(types: rk.TypeTable, instance_types: list[InstanceType], precisions: list[str],
            probes: list[ProbeOffer | None], estimator, base: list[int] | None = None) -> Beliefs:
    """The bands as the value model reads them, and how the types' truths hang together, from the
    estimator: its re-anchoring rule (a probe of p moves u's estimate with weight 1 / (1 + d)^2, d
    its pair distance between their devices) and its calibrated band after a probe (log half-width
    probe_scale x (1 + d)). What a probe of a sibling leaves unknown (d = 0) is the types' own
    variance; what a probe of another device leaves (d: the mean distance to the other devices in
    play) adds the device factor; the rest of each band is common to all types."""
    sd_low, sd_high = split_normal_sds(types.samples_per_sec, types.low, types.high)
    devs = [instance_device(it, prec) for it, prec in zip(instance_types, precisions)]
    index_of = {d: i for i, d in enumerate(dict.fromkeys(devs))}
    keys = list(index_of)
    dev = np.array([index_of[d] for d in devs], dtype=np.int64)
    far = 2 * NEW_KIND  # a type with no device figures: as far as anything gets
    dd = np.zeros((len(keys), len(keys)))
    for a_i, a in enumerate(keys):
        for b_i, b in enumerate(keys):
            if a_i != b_i:
                dd[a_i, b_i] = far if a is None or b is None else pair_distance(a, b)
    z = band_z()
    scale = probe_band_scale(estimator) / z
    var = np.maximum((sd_low**2 + sd_high**2) / 2, 1e-12)
    # Var(u - p) once p is probed = own_u + own_p, plus device_u + device_p across devices.
    own = np.minimum(scale**2 / 2, var)
    n_dev = len(keys)
    mean_d = dd.sum(axis=1) / max(n_dev - 1, 1)
    device = np.clip((scale * (1 + mean_d[dev])) ** 2 / 2 - own, 0.0, var - own)
    sib = [sibling_key(it) for it in instance_types]
    index = {k: i for i, k in enumerate(dict.fromkeys(sib))}
    common = np.nan_to_num((var - own - device) / var).clip(0.0, 1.0)
    return Beliefs(
        sd_low=sd_low, sd_high=sd_high, common_share=common, device=dev,
        device_share=device / var, weight=1.0 / (1.0 + dd[dev][:, dev]) ** 2, measured=types.source == 0,
        moves=types.source == rk.SOURCE_NAMES.index("estimated"), group=np.array([index[k] for k in sib], dtype=np.int64),
        probe_usd=np.array([p.usd if p else np.inf for p in probes], dtype=float),
        probe_hours=np.array([p.hours if p else np.inf for p in probes], dtype=float), noise_sd=PROBE_NOISE_SD,
        base=None if base is None else np.array(base, dtype=np.int64))


def plan_probes(*, types: rk.TypeTable, offers: rk.OfferTable, candidates: rk.Candidates, job: rk.Job,
                objective: str, pick: int | None, instance_types: list[InstanceType], precisions: list[str],
                estimator, probe_budget_usd: float | None = None, draws: int = DRAWS, seed: int = 0,
                uncalibrated: list[int] | None = None, base: list[int] | None = None,
                past: PastProbes | None = None):
    """(the probe plan, the per-type probe offers) for a ranked set of candidates; `estimator` is
    the ThroughputModel the candidates' throughputs came from. `uncalibrated`: types whose
    estimate no held-out case calibrates (a GPU known only from a CPU probe), in ranked order:
    the first that can be probed goes ahead of every other probe. `base`: per type, the type it
    is a variant of (itself where none): a variant is never probed on its own, its type's probe
    (with --cpu-too) measures both. `past`: the store's probes of the workload, whose own times
    price a probe (probetime.py)."""
    from . import value

    where = probe_offers(types, offers, instance_types, past)
    for t, b in enumerate(base or []):
        if b != t:
            where[t] = None
    bel = beliefs(types, instance_types, precisions, where, estimator, base)
    after = after_probe_sds(types, estimator) if job.confidence else []
    first = next((t for t in uncalibrated or [] if where[t] is not None), None)
    why = None if first is None else ("uncalibrated: its estimate carries a probe of another device kind across "
                                      "kinds, which no published workload calibrates; measure it first, before "
                                      "trusting the ranking")
    plan = value.plan(economics(candidates, offers, job, objective, after), bel, pick, probe_budget_usd, draws=draws,
                      seed=seed, max_probes=MAX_PROBES, first=None if first is None else (first, why))
    return plan, where

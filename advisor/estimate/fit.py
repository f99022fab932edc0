"""The anchor fit: one model of training throughput across devices, fitted on all anchors at once.

Time per sample on one device is the sum of three parts (an additive roofline):

    t = F/(eta P) + F beta/(I_w B) + F c

compute at the device's peak P (TFLOP/s at the precision used), memory traffic at its bandwidth B
(GB/s; beta = 2 when activations are fp32/TF32, 1 when 16-bit), and a part that neither makes
faster (kernel launches, the framework's per-step work, the host). I_w is the workload's own
arithmetic intensity (shapes.py: counted FLOPs per unfused byte); F, eta and c are not known per
workload, so with lambda_w = log(eta / F) and m_w = I_ref / I_w (1 for the reference workload,
ResNet-50, and for an unshaped one) the model in log space is

    log sps = lambda_w + sigma [tuned stack] + kappa_kind - log(1/P + m_w (theta_m beta/B + theta_o))

(sigma for accelerators only: the CPU rows are Article A's ladder, the probe's own CPU stack)

with theta_m = 1000 eta / I_ref (the unfused count's share that real, fused kernels move is in it)
and theta_o = eta c in units of 1/(TFLOP/s). The fixed part scales with m_w as well: kernel launches
and per-op framework work come with the unfused ops the counter sums, so per FLOP a low-intensity
network (EfficientNet's depthwise convolutions, m ~ 5-7) pays more of it than BERT (m ~ 0.6); with
the fixed part shared, leave-one-workload-out put BERT-Large on an H100 37% low. So device ratios
differ by workload: a low-intensity network gains less from FLOP/s than one of high intensity. It saturates: past the
point where the memory and fixed terms dominate, more FLOP/s buys little (within one stack an
H200 is ~1.1x an H100, not the 1.4x its bandwidth alone would say). CPUs have no bandwidth figure
in the catalog: for them only the compute term, with their own offset kappa_cpu.

Fitting: for each (theta_m, theta_o) on a log grid the rest is linear least squares in log space
(relative errors), rows weighted so each device counts once; the grid point with the least
weighted squared error wins. A row whose publisher ran each device at its own batch adds
g_w (log batch - c_w) to its workload's level (batch_slopes). A few milliseconds for a few hundred rows (numpy only).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .points import Device, Point
from .split import seconds_per_flop

# Coarse grids (0 = the term absent); the best point is then refined between its neighbours.
THETA_M_GRID = np.concatenate(([0.0], np.logspace(-1, 2.5, 15)))
THETA_O_GRID = np.concatenate(([0.0], np.logspace(-4.5, -1.0, 15)))
REFINE_STEPS = 9
# How a CPU's throughput grows with its counted peak (cores x clock x ISA of one socket), as an
# exponent: sps ~ peak^CPU_SCALING from the CPU anchors' peak. What is published brackets it and no
# more: linear in the cores' FLOP/s at most (1), and no gain at all at the other end (0: Article A,
# data-parallel across the two sockets of a c6i.32xlarge did not raise throughput; Article C,
# memory channels, not cores, moved PyTorch by ~20%, and the catalog carries no channel counts).
# The dataset's CPU rows are one size of one CPU, so nothing fits it: the middle is the log-centre
# of that bracket and the band spans both ends (predict.py). Below the anchors' peak: linear.
CPU_SCALING = 0.5
# Memory channels: a CPU with more DDR channels per core trains faster at the same counted peak.
# Derived from Article C's one observation, 8-channel vs 4-channel memory gave ~20% in PyTorch on
# one CPU: x1.2 per doubling of channels per core, exponent log2(1.2) = 0.263. Channel counts per
# socket are read with their source (catalog/data/accelerators.json); a family without one, or a
# machine off EC2, is taken at its anchors' balance, and the band spans no channel effect to twice
# it (predict.py): one home workstation's figure, never fitted.
CPU_CHANNELS_EXPONENT = math.log2(1.2)

# A device's own rows move its prediction by their mean residual, shrunk towards the model:
# n rows count n / (n + SHRINK_ROWS). A workload with rows of its own on the device takes those rows'
# residual (BERT's rows on an A10 say how BERT runs there, not ResNet-50); any other workload, all rows'.
# A device with no rows at all takes its architecture family's residual: the mean of its siblings',
# each weighted by how well its residual tells the family's and all shrunk to the model by how far
# families differ, both fitted on the devices' own residuals (family_prior: where a fixed SHRINK_ROWS
# lent a family of one sibling a third of its residual, leave-one-device-out 13.6% -> 11.5%, the
# RTX 6000 Ada 13.8% -> 8%); for a workload its siblings have
# rows of, their residual for that workload (an H200's ResNet-50 takes the H100's ResNet-50 rows'
# residual, not the H100's mean over every workload there: with the Lambda table's speech,
# translation and recommender rows on the H100 a held-out H200 read 19% low, 15% so; leave-one-
# device-out over the version-2 rows 13.2% -> 11.9%, over every row 15.9% -> 14.0%). How well kernels and libraries use
# a peak is an architecture matter (the RTX 4090 and RTX 6000 Ada both run ~20% above the roofline,
# so an L40S, the same AD102 chip, should too); leave-one-device-out measures what it buys.
SHRINK_ROWS = 2.0


def own_key(group: str, workload: str | None) -> str:
    """Fit.resid's key for one workload's rows on a device group (the group alone: all its rows)."""
    return f"{group}|{workload}"


def family_key(family: str) -> str:
    """Fit.resid's key for an architecture family's residual (its devices' mean)."""
    return f"family:{family}"


@dataclass
class Fit:
    theta_m: float
    theta_o: float
    sigma: float  # log(tuned / default) on one device
    kappa: dict[str, float]  # device kind -> offset (gpu: 0)
    level: dict[str, float]  # workload -> lambda_w
    # device group (and own_key(group, workload)) -> (mean residual, rows counted by weight)
    resid: dict[str, tuple[float, float]]
    devices: dict[str, Device] = field(default_factory=dict)  # every device variant in the fit, by key
    rows: int = 0
    rms: float = 0.0  # weighted rms residual (log)
    # workload -> m_w = I_ref / I_w, its memory term against the reference workload's (absent: 1)
    mem_factor: dict[str, float] = field(default_factory=dict)
    cpu_ref: float | None = None  # the CPU anchors' counted peak (geometric mean), TFLOP/s; None: no CPU fitted
    cpu_channels_ref: float | None = None  # their DDR channels per socket core (geometric mean); None: unknown
    # architecture family -> log(tuned / default) fitted on its own rows, for a family with a device
    # published at both stacks (stack_factors); any other family takes sigma, the rest's
    sigma_family: dict[str, float] = field(default_factory=dict)
    # family -> (lowest, highest) tuned/default gap, log, of its devices published at both stacks
    sigma_band: dict[str, tuple[float, float]] = field(default_factory=dict)
    # workload -> (g, c): its rows published at a batch chosen per device run exp(g (log batch - c))
    # times its level (batch_slopes); a workload absent runs at one batch, or no table says
    batch_slope: dict[str, tuple[float, float]] = field(default_factory=dict)
    # A device without rows takes its family's residual: its siblings' mean, sibling g weighted
    # 1 / (family_sd2 + rms^2 / its rows), shrunk to the model as n / (n + family_shrink), n their
    # weights' sum and family_shrink = 1 / tau^2, how far families differ (family_prior)
    family_shrink: float = SHRINK_ROWS
    family_sd2: float = 0.0

    def stack_log(self, dev: Device) -> float:
        """log(tuned / default) on this device: its architecture family's, else the pooled sigma (0: a CPU)."""
        if dev.kind == "cpu":
            return 0.0
        return self.sigma_family.get(dev.family or "", self.sigma)

    def factor(self, workload: str | None, intensity: float | None = None) -> float:
        """m_w for a workload: from a given intensity (a user's probe), else the fit's, else 1."""
        if intensity and self.mem_factor.get(REFERENCE_KEY):
            return self.mem_factor[REFERENCE_KEY] / intensity
        return self.mem_factor.get(workload or "", 1.0)

    def knows(self, kind: str) -> bool:
        """Whether any device of this kind (gpu, cpu, ...) was fitted: its offset is then known."""
        return any(d.kind == kind for d in self.devices.values())

    def offset(self, dev: Device, workload: str | None = None, intensity: float | None = None) -> float:
        m = self.factor(workload, intensity)
        return device_offset(dev, self.theta_m * m, self.theta_o * m, self.cpu_ref, self.cpu_channels_ref)

    def log_predict(self, dev: Device, workload: str | None, stack: str, level: float | None = None,
                    own_rows: bool = True, intensity: float | None = None, batch: int | None = None) -> float:
        """log per-device samples/s; `level` overrides the workload's (another workload, or probes),
        `intensity` the workload's shape (a user's own workload, from its probe), `batch` the batch a
        published row ran at when its publisher chose it per device (a user's runs keep theirs: None)."""
        lam = self.level[workload] if level is None else level
        y = lam + (self.stack_log(dev) if stack == "tuned" else 0.0) + self.kappa.get(dev.kind, 0.0) \
            - self.offset(dev, workload, intensity) + self.batch_log(workload, batch)
        key = own_key(dev.group, workload)
        key = key if key in self.resid else dev.group
        if own_rows and key in self.resid:
            mean, n = self.resid[key]
            y += mean * n / (n + SHRINK_ROWS)
        else:
            y += math.log(self.family_factor(dev, workload)[0])
        return y

    def batch_log(self, workload: str | None, batch: int | None) -> float:
        """log of what running at `batch` gives a workload against its fitted level (0: no batch, or no slope)."""
        if not batch or workload not in self.batch_slope:
            return 0.0
        g, centre = self.batch_slope[workload]
        return g * (math.log(batch) - centre)

    def family_factor(self, dev: Device, workload: str | None = None) -> tuple[float, str | None]:
        """(the factor a device with no rows of its own in the fit takes from its architecture
        family's devices, the family): 1 and None where it has rows, or no sibling was fitted.
        With `workload`, the siblings' residual for that workload where they have its rows."""
        fam = family_key(dev.family) if dev.family else None
        if dev.group in self.resid or fam not in self.resid:
            return 1.0, None
        mean, n = self.resid.get(own_key(fam, workload), self.resid[fam])
        return math.exp(mean * n / (n + self.family_shrink)), dev.family

    def describe(self) -> dict:
        return {
            "form": "log sps = lambda_workload + sigma*[tuned] + kappa_kind - log(1/P + m_workload*(theta_m*beta/B + theta_o))",
            "m_workload": {w: round(v, 3) for w, v in sorted(self.mem_factor.items()) if w != REFERENCE_KEY},
            "theta_m": round(self.theta_m, 4), "theta_o": round(self.theta_o, 6),
            "tuned_over_default": round(math.exp(self.sigma), 3),
            "tuned_over_default_by_family": {k: {"factor": round(math.exp(v), 3), "devices_at_both": [
                round(math.exp(x), 3) for x in self.sigma_band.get(k, ())]} for k, v in sorted(self.sigma_family.items())},
            "kappa": {k: round(v, 3) for k, v in self.kappa.items()},
            "cpu_scaling": {"exponent": CPU_SCALING, "anchor_peak_tflops": None if self.cpu_ref is None else
                            round(self.cpu_ref, 3), "channels_exponent": round(CPU_CHANNELS_EXPONENT, 3),
                            "anchor_channels_per_core": None if self.cpu_channels_ref is None else
                            round(self.cpu_channels_ref, 4)},
            "rows": self.rows, "devices": len({d.group for d in self.devices.values()}), "rms_log_residual": round(self.rms, 3),
        }


def cpu_log_peak(peak: float, ref: float | None) -> float:
    """log of a CPU's effective peak: its own up to the anchors' (ref: fewer cores, each with more
    memory bandwidth, stay compute-bound), CPU_SCALING of the way beyond it."""
    if ref is None or peak <= ref:
        return math.log(peak)
    return CPU_SCALING * math.log(peak) + (1.0 - CPU_SCALING) * math.log(ref)


def cpu_channels_log(channels_per_core: float | None, ref: float | None) -> float:
    """log of what a CPU's memory channels per core give against its anchors' (0 where either is unknown)."""
    if not channels_per_core or not ref:
        return 0.0
    return CPU_CHANNELS_EXPONENT * math.log(channels_per_core / ref)


def device_offset(dev: Device, theta_m: float, theta_o: float, cpu_ref: float | None = None,
                  channels_ref: float | None = None) -> float:
    if dev.bandwidth is None:
        return -cpu_log_peak(dev.peak, cpu_ref) - cpu_channels_log(dev.channels_per_core, channels_ref)
    return math.log(float(seconds_per_flop(1.0 / dev.peak, dev.bytes_factor / dev.bandwidth, 1.0, theta_m, theta_o)))


REFERENCE_KEY = "_reference_intensity"  # mem_factor's entry holding I_ref itself


def memory_factors(workloads, intensity: dict[str, float] | None, reference: str) -> dict[str, float]:
    """m_w = I_ref / I_w for each shaped workload, I_ref kept under REFERENCE_KEY; {} when shared
    (intensity None: one intensity for every workload, the model before workload shapes)."""
    if not intensity:
        return {}
    ref = intensity.get(reference) or float(np.exp(np.mean(np.log(list(intensity.values())))))
    return {REFERENCE_KEY: ref} | {w: ref / intensity[w] for w in workloads if w in intensity}


def group_weights(groups: list[str]) -> np.ndarray:
    """1 / (rows of its group) for each row: every device counts once, however many rows it has."""
    n: dict[str, int] = {}
    for g in groups:
        n[g] = n.get(g, 0) + 1
    return np.array([1.0 / n[g] for g in groups])


def fit(points: list[Point], intensity: dict[str, float] | None = None, reference: str = "resnet50") -> Fit:
    """Least squares over all points (reference rows, not probes). `intensity`: workload -> FLOPs
    per byte (shapes.intensities()); None fits one shared intensity (the model before shapes).
    A point's weight is its device's share (each device counts once) x its own evidence weight
    (a derived figure less than a read one).

    The stack factor: per architecture family with a device published at both stacks, its own
    (stack_families); the tuned rows of any other family have no contrast of their own to fit it
    on, so they take the mean of those families' factors (a second pass, that factor held fixed)."""
    first = _fit(points, intensity, reference)
    rest = [p for p in points if p.stack == "tuned" and p.device.kind != "cpu"
            and p.device.family not in first.sigma_family]
    if not first.sigma_family or not rest:
        return first
    pooled = float(np.mean(list(first.sigma_family.values())))
    return _fit(points, intensity, reference, rest_sigma=pooled)


def _fit(points: list[Point], intensity: dict[str, float] | None, reference: str,
         rest_sigma: float | None = None) -> Fit:
    """The fit; a batch slope that comes out negative is dropped and the rest refitted (a larger batch
    does not slow a sample down: what a negative slope reads is the devices' memory sizes, which set
    the batch, standing in for some other difference between them)."""
    centres = batch_slopes(points)
    while True:
        f = _fit_once(points, intensity, reference, rest_sigma, centres)
        negative = {wl for wl, (g, _) in f.batch_slope.items() if g < 0}
        if not negative:
            return f
        centres = {wl: c for wl, c in centres.items() if wl not in negative}


def _fit_once(points: list[Point], intensity: dict[str, float] | None, reference: str,
              rest_sigma: float | None, centres: dict[str, float]) -> Fit:
    if not points:
        raise ValueError("nothing to fit")
    n = len(points)
    factors = memory_factors({p.workload for p in points}, intensity, reference)
    y = np.log([p.sps for p in points])
    cpus = [p.device for p in points if p.device.bandwidth is None]
    cpu_ref = float(np.exp(np.mean(np.log([d.peak for d in cpus])))) if cpus else None
    # Channels enter only when every CPU anchor's count was read (else no anchor balance to scale from).
    ch_ref = float(np.exp(np.mean(np.log([d.channels_per_core for d in cpus])))) if cpus and all(
        d.channels_per_core for d in cpus) else None
    inv_p = np.array([1.0 / p.device.peak if p.device.bandwidth is not None else
                      math.exp(device_offset(p.device, 0.0, 0.0, cpu_ref, ch_ref)) for p in points])
    # split.py's terms per point: the memory system's beta/B and the workload's m_w (0 for a CPU:
    # no bandwidth figure, so neither the memory nor the fixed term applies).
    mem = np.array([p.device.bytes_factor / p.device.bandwidth if p.device.bandwidth else 0.0 for p in points])
    mfac = np.array([factors.get(p.workload, 1.0) if p.device.bandwidth else 0.0 for p in points])
    has_bw = mfac > 0
    ev = np.array([p.weight for p in points])
    w = group_weights([p.device.group for p in points]) * ev

    workloads = sorted({p.workload for p in points})
    kinds = sorted({p.device.kind for p in points} - {"gpu"})
    cols = [np.array([p.workload == wl for p in points], float) for wl in workloads]
    # The stack factor is an accelerator matter (NHWC + DALI vs NCHW on synthetic data). The CPU
    # rows are Article A's ladder, which the probe's CPU ladder repeats: their offset kappa_cpu
    # already describes the probe's stack.
    tuned = np.array([p.stack == "tuned" and p.device.kind != "cpu" for p in points], float)
    has_sigma = 0 < tuned.sum() < n
    # Per architecture family where one of its devices was published at both stacks: how much a
    # tuned stack buys is a generation's matter (NHWC and DALI gained the A100 ~1.6x over Lambda's
    # NCHW runs, timm's NHWC the RTX 3090 1.26-1.47x); the rest share one factor.
    fams = stack_families(points) if has_sigma else []
    in_fam = np.array([p.device.family in fams for p in points])
    rest = tuned * ~in_fam
    fam_cols = [tuned * np.array([p.device.family == fa for p in points]) for fa in fams]
    has_rest = has_sigma and rest.sum() > 0 and rest_sigma is None
    if rest_sigma is not None:  # held at the families' mean (fit's second pass)
        y = y - rest_sigma * rest
    if has_rest:
        cols.append(rest)
    cols += fam_cols
    # A kind's offset is only identified beside GPUs: a CPU-only set has no separate scale.
    kind_cols = [k for k in kinds if any(p.device.kind == "gpu" for p in points)]
    cols += [np.array([p.device.kind == k for p in points], float) for k in kind_cols]
    cols += [np.array([math.log(p.batch) - c if p.workload == wl and p.per_device_batch and p.batch else 0.0
                       for p in points]) for wl, c in centres.items()]
    X = np.stack(cols, axis=1)

    sw = np.sqrt(w)
    Xw = X * sw[:, None]
    u, s, _ = np.linalg.svd(Xw, full_matrices=False)
    U = u[:, s > s[0] * 1e-10]

    def sse_of(tm: np.ndarray, to: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        inner = seconds_per_flop(inv_p[None, :], mem[None, :], mfac[None, :], tm[:, None], to[:, None])
        R = (y[None, :] + np.log(inner)) * sw[None, :]  # target of the linear part, weighted
        resid = R - (R @ U) @ U.T
        return np.einsum("gi,gi->g", resid, resid), R

    if not has_bw.any():  # CPUs only: the memory and fixed terms do not apply
        theta_m = theta_o = 0.0
    else:
        tm, to = (a.ravel() for a in np.meshgrid(THETA_M_GRID, THETA_O_GRID, indexing="ij"))
        g = int(np.argmin(sse_of(tm, to)[0]))
        fine_m = _between(THETA_M_GRID, g // len(THETA_O_GRID))
        fine_o = _between(THETA_O_GRID, g % len(THETA_O_GRID))
        tm, to = (a.ravel() for a in np.meshgrid(fine_m, fine_o, indexing="ij"))
        g = int(np.argmin(sse_of(tm, to)[0]))
        theta_m, theta_o = float(tm[g]), float(to[g])
    _, R = sse_of(np.array([theta_m]), np.array([theta_o]))
    O = np.log(seconds_per_flop(inv_p, mem, mfac, theta_m, theta_o))
    beta, *_ = np.linalg.lstsq(Xw, R[0], rcond=None)
    r = (y + O) - X @ beta  # unweighted residuals in log space

    level = {wl: float(beta[i]) for i, wl in enumerate(workloads)}
    k = len(workloads)
    sigma = float(beta[k]) if has_rest else 0.0
    k += int(has_rest)
    sigma_family = {fa: float(beta[k + i]) for i, fa in enumerate(fams)}
    k += len(fams)
    if not has_rest and sigma_family:  # other families take the families' mean
        sigma = float(np.mean(list(sigma_family.values())))
    kappa = {"gpu": 0.0} | {kd: float(beta[k + i]) for i, kd in enumerate(kind_cols)}
    k += len(kind_cols)
    slope = {wl: (float(beta[k + i]), c) for i, (wl, c) in enumerate(centres.items())}
    sums: dict[str, list[tuple[float, float]]] = {}
    shaped: dict[str, list[tuple[float, float]]] = {}
    for p, ri in zip(points, r):
        for key in (p.device.group, own_key(p.device.group, p.workload)):
            sums.setdefault(key, []).append((float(ri), p.weight))
        if p.workload in factors:
            shaped.setdefault(p.device.group, []).append((float(ri), p.weight))
    # A device's own residual (what a workload with no rows there takes) is read from the rows of
    # workloads whose shape is counted, where it has any: an unshaped workload's rows, given the
    # reference workload's intensity, carry that shape's error too (a memory-bound recommender's
    # H100 rows would pull every other workload's H100 estimate down). _device_residuals weighs them.
    sums |= shaped
    # A device's mean residual, each row weighted by its evidence; a derived row counts as a fraction of one.
    res = {grp: (sum(x * e for x, e in v) / sum(e for _, e in v), sum(e for _, e in v)) for grp, v in sums.items()}
    res |= _device_residuals(points, r, factors)
    devices = {}
    for p in points:
        devices.setdefault(p.device.key, p.device)
    rms = float(np.sqrt(np.sum(w * r**2) / np.sum(w)))
    # rows scatter about their device's mean by ~rms: a sibling's residual of few rows is that noisy
    s2 = max(rms * rms, NOISE_FLOOR)
    shrink, sd2 = family_prior(devices.values(), res, s2)
    res |= _family_residuals(devices.values(), res, workloads, s2, sd2)
    return Fit(theta_m, theta_o, sigma, kappa, level, res, devices, n, rms, factors, cpu_ref, ch_ref, sigma_family,
               _stack_bands(points, r, sigma_family), slope, shrink, sd2)


def batch_slopes(points: list[Point]) -> dict[str, float]:
    """Workloads whose rows of per-device batches (Point.per_device_batch) run two or more batches,
    each with the mean log batch of those rows (where its slope is centred).

    A table that runs each device at its own batch (Lambda's: each GPU the largest its memory holds)
    publishes device ratios times batch ratios. How much a larger batch gives is the workload's
    matter (a step's fixed work spread over more samples), so each such workload has its own slope,
    an elasticity of throughput in the batch, fitted beside its level: exp(g (log b - c)). Without it
    Tacotron 2's 4.5x and WaveGlow's 5.0x from a V100-16GB (batch 48, 8) to an A100-80GB (256, 48)
    were read as device gains alone. The table sets each batch by the GPU's memory, so a slope is
    only partly identified (memory size and device speed go together); _fit keeps it at 0 or above."""
    logs: dict[str, list[float]] = {}
    for p in points:
        if p.per_device_batch and p.batch:
            logs.setdefault(p.workload, []).append(math.log(p.batch))
    return {wl: float(np.mean(v)) for wl, v in sorted(logs.items()) if len(set(v)) > 1}


# A workload's residuals spread this much (log, squared: 10%) at the least when it weighs in a
# device's residual: a workload whose rows happen to agree is not taken as exact.
RESID_VAR_FLOOR = 0.01


def _device_residuals(points: list[Point], r: np.ndarray, factors: dict[str, float]) -> dict[str, tuple[float, float]]:
    """Each device's residual over its rows of shaped workloads, a workload weighed by how well the
    model follows it across devices (1 / the variance of its residuals, RESID_VAR_FLOOR at the
    least), and its rows' evidence: (the weighted mean, the rows counted by evidence).

    The device's residual is what a workload with no rows there takes, so it should say how the
    device runs workloads in general. Lambda's table puts Tacotron 2 at 4.5x and WaveGlow at 5.0x
    from a V100-16GB to an A100-80GB (ResNet-50 2.0x): each GPU runs its own largest batch, which
    these latency-bound models gain most from, an effect no device figure carries. Averaged in row by
    row, those rows lifted every other workload's A100 / V100 ratio ~10% (leave-one-workload-out
    on the pair's 7 version-2 workloads: 3.8% -> 21%; 8.7% so). A workload seen on one device only
    says nothing of it (its level absorbs its rows: residual 0) and is left out where there is more."""
    by_workload: dict[str, list[float]] = {}
    groups_of: dict[str, set[str]] = {}
    for p, ri in zip(points, r):
        by_workload.setdefault(p.workload, []).append(float(ri))
        groups_of.setdefault(p.workload, set()).add(p.device.group)
    spread = {wl: float(np.var(v)) + RESID_VAR_FLOOR for wl, v in by_workload.items()}
    cells: dict[str, list[tuple[float, float, str]]] = {}
    for p, ri in zip(points, r):
        if p.workload in factors:
            cells.setdefault(p.device.group, []).append((float(ri), p.weight, p.workload))
    out = {}
    for grp, rows in cells.items():
        seen = [row for row in rows if len(groups_of[row[2]]) > 1] or rows
        wsum = sum(e / spread[wl] for _, e, wl in seen)
        out[grp] = (sum(x * e / spread[wl] for x, e, wl in seen) / wsum, sum(e for _, e, _ in rows))
    return out


def stack_families(points: list[Point]) -> list[str]:
    """Architecture families with a device (group) published at both the tuned and the default stack."""
    stacks: dict[tuple[str, str], set[str]] = {}
    for p in points:
        if p.device.kind != "cpu" and p.device.family:
            stacks.setdefault((p.device.family, p.device.group), set()).add(p.stack)
    return sorted({fa for (fa, _), st in stacks.items() if len(st) == 2})


def _stack_bands(points: list[Point], r: np.ndarray, sigma_family: dict[str, float]) -> dict[str, tuple[float, float]]:
    """Per family, the lowest and highest log tuned/default gap of its devices at both stacks: the
    family's factor plus that device's mean tuned residual less its mean default residual."""
    out: dict[str, tuple[float, float]] = {}
    for fa, sig in sigma_family.items():
        gaps = []
        for g in sorted({p.device.group for p in points if p.device.family == fa}):
            t = [ri for p, ri in zip(points, r) if p.device.group == g and p.stack == "tuned"]
            d = [ri for p, ri in zip(points, r) if p.device.group == g and p.stack == "default"]
            if t and d:
                gaps.append(sig + float(np.mean(t)) - float(np.mean(d)))
        if gaps:
            out[fa] = (min(gaps), max(gaps))
    return out


def _family_residuals(devices, res: dict[str, tuple[float, float]], workloads, s2: float,
                      sd2: float) -> dict[str, tuple[float, float]]:
    """Each architecture family's residual over its fitted device groups: their mean, group g
    weighted by how well its residual tells the family's, 1 / (sd2 + s2 / its rows) (a device's own
    departure from its family, plus its rows' noise: an H200 of 2 rows weighs less than an H100 of
    80), and the weights' sum (family_prior: the prior's weight in the same units)."""
    groups: dict[str, dict[str, None]] = {}
    for d in devices:
        if d.family:
            groups.setdefault(d.family, {})[d.group] = None

    def share(cells):
        w = [(mean, 1.0 / (sd2 + s2 / n)) for mean, n in cells]
        total = sum(x for _, x in w)
        return sum(m * x for m, x in w) / total, total

    out = {}
    for fam, members in groups.items():
        out[family_key(fam)] = share([res[g] for g in members])
        for wl in workloads:
            mine = [res[own_key(g, wl)] for g in members if own_key(g, wl) in res]
            if mine:
                out[own_key(family_key(fam), wl)] = share(mine)
    return out


# Floors on the variances family_prior works with (log, squared): a noiseless fit (synthetic rows)
# or siblings that happen to agree are not taken as exact.
NOISE_FLOOR = 1e-4


def family_prior(devices, res: dict[str, tuple[float, float]], s2: float) -> tuple[float, float]:
    """(1 / tau^2, sd2): how much the prior (the model: residual 0) weighs against a family's
    siblings, and how far one device departs from its family, from the fitted devices' residuals
    (random effects, moments, each device group once):

        residual of device g = family effect (variance tau^2) + device effect (sd2) + noise (s2 / rows)

    sd2 is the devices' variance about their family's mean less their rows' noise; tau^2 the family
    means' mean square less what their devices' spread puts in it. A fixed SHRINK_ROWS of 2 devices
    let a family of one sibling lend a third of its residual; on the shipped rows families differ far
    more than their devices do (the RTX 4090 and RTX 6000 Ada both run above the model, the A100 and V100
    below), so a sibling tells most of it. Computed on the fit's own devices (a held-out device is not
    among them). Where no family has two fitted devices: SHRINK_ROWS devices of s2 each; where the
    families do not differ beyond their devices: infinite (nothing lent)."""
    devices = list(devices)
    # A kind with one device model (a Trainium beside the GPUs) has its residual taken by its offset
    # kappa: 0 by construction, no evidence of how families differ.
    kinds: dict[str, set[str]] = {}
    for d in devices:
        kinds.setdefault(d.kind, set()).add(d.group)
    groups: dict[str, dict[str, None]] = {}
    for d in devices:
        if d.family and d.group in res and len(kinds[d.kind]) > 1:
            groups.setdefault(d.family, {})[d.group] = None
    means, within, dof = [], 0.0, 0
    for members in groups.values():
        r = np.array([res[g][0] for g in members])
        means.append((float(r.mean()), len(r)))
        within += float(((r - r.mean()) ** 2).sum())
        dof += len(r) - 1
    if dof == 0:
        return SHRINK_ROWS / s2, s2
    sigma2 = within / dof
    noise = float(np.mean([s2 / res[g][1] for members in groups.values() for g in members]))
    sd2 = max(sigma2 - noise, NOISE_FLOOR)
    tau2 = float(np.mean([m * m - sigma2 / n for m, n in means]))
    return (1.0 / tau2 if tau2 > 0 else math.inf), sd2


def _between(grid: np.ndarray, i: int) -> np.ndarray:
    """REFINE_STEPS values spanning grid[i]'s neighbours (geometric; 0 kept as a candidate)."""
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    pos = [v for v in (lo, grid[i], hi) if v > 0]
    fine = np.geomspace(min(pos), max(pos), REFINE_STEPS) if pos else np.array([])
    return np.concatenate(([0.0], fine)) if lo == 0 else fine

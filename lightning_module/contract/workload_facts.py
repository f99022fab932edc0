"""What the advisor needs to know about a builtin workload, without importing torch.

The numbers were measured by scripts/measure_workload_facts.py (torch.utils.flop_counter for
FLOPs, autograd saved-tensor hooks for activations) at 224x224 input and 1000 classes; rerun it
after changing a builtin model. `advisor recommend` reads this table on its torch-free path.

Scaling to other input sizes (an approximation, stated in every estimate's basis): CNN FLOPs and
activations grow with the pixel count, (image_size / 224)^2. ViT-B/16 FLOPs are dominated by the
per-token matmuls, so the same pixel-count rule is a slight underestimate at large sizes (the
attention term grows with tokens squared). The MLP's first layer sees the flattened image, so its
FLOPs grow with the pixel count as well. The classifier head's share is small and is not
rescaled for other class counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

REFERENCE_IMAGE_SIZE = 224
REFERENCE_NUM_CLASSES = 1000
# The smallest batch that still trains sensibly with BatchNorm; the memory floor uses it.
MIN_SENSIBLE_BATCH = 8

MEASURED_WITH = "torch 2.15.0, torchvision 0.29.2, torch.utils.flop_counter (2 FLOPs per MAC)"


@dataclass(frozen=True)
class WorkloadFacts:
    model: str
    params: int | None  # None: not known (a user's own module, seen only through its probes)
    train_flops_per_sample: float  # forward + backward at `at_image_size`; NaN when not known
    forward_flops_per_sample: float
    activation_bytes_per_sample: float  # fp32 tensors saved for backward, per sample
    at_image_size: int = REFERENCE_IMAGE_SIZE
    # A user's own module, from its newest probe that recorded its shape (result.WorkloadShape):
    state_bytes: float | None = None  # weights + fp32 gradients + optimizer state, as measured
    memory: Any = None  # result.MemoryFit: peak memory against batch size
    best_batch: int | None = None  # that probe's winning batch per device
    # Training FLOPs per byte the ops without FLOPs move (result.WorkloadShape's counts: the split
    # intensity, advisor/estimate/split.py); None: not counted here
    # (a builtin's is in advisor/data/workload_intensity.json)
    intensity: float | None = None
    # The ops one training step dispatches (result.WorkloadShape.ops_per_step) and the batch of the
    # probe that counted them, its best configuration's per device: the host floor of a GPU step
    # (advisor/estimate/host_floor.py). None: not counted (a builtin, an older result).
    ops_per_step: int | None = None
    ops_batch: int | None = None
    # That probe's loader rate (samples/s, timed alone) where its configuration had no loader
    # workers, so the training process made every batch; None: workers fed it, or not timed.
    ops_loader_rate: float | None = None
    # A transformer language model's shape (transformer_shape.TransformerShape) and the sequence
    # length it trains at, where known (a declared shape, or a probe that read it): recommend then
    # fits it per device with the training-memory model and the strategy search instead of the
    # memory fit's wall (advisor/estimate/throughput.py, _memory_fit).
    transformer: Any = None
    seq_len: int | None = None
    # The newest probe's measured activations (result.Activations: bytes per token per layer, and
    # per token per position for attention scores that grow with the length); where the transformer
    # facts are known too, the memory model takes them over its count from the shape. None: not measured.
    activations: Any = None

    def measured_act_per_token_layer(self, seq_len: int) -> float | None:
        """The measured activation bytes per token per layer at `seq_len`; None: not measured."""
        a = self.activations
        return None if a is None else a.bytes_per_token_per_layer + a.bytes_per_token_per_position_per_layer * seq_len

    def flops_per_sample(self, image_size: int = REFERENCE_IMAGE_SIZE) -> float:
        return self.train_flops_per_sample * (image_size / self.at_image_size) ** 2

    def gradient_bytes(self) -> float:
        """fp32 gradients: what data-parallel training all-reduces every step (NaN: unknown). A
        user's module counts all its parameters: frozen ones as well (an upper bound)."""
        return float("nan") if self.params is None else self.params * 4.0

    def memory_floor_gib(self, image_size: int = REFERENCE_IMAGE_SIZE) -> float:
        """Accelerator memory the workload needs at the least: fp32 weights + gradients + SGD
        momentum (3 x params x 4 bytes) plus fp32 activations at MIN_SENSIBLE_BATCH. Mixed
        precision needs less activation memory, so this is a conservative floor. A user's module:
        the weights, gradients and optimizer state its probe measured (activations are in its
        memory fit, which recommend reads apart). 0 when the parameter count is not known."""
        if self.state_bytes is not None:
            return self.state_bytes / 2**30
        if self.params is None:
            return 0.0
        act = self.activation_bytes_per_sample * (image_size / self.at_image_size) ** 2
        return (3 * self.params * 4 + MIN_SENSIBLE_BATCH * act) / 2**30


def facts_from_probes(model: str, image_size: int, results: list) -> WorkloadFacts:
    """What can be known of a user's own workload from its probe results (ProbeResults, newest
    first): the FLOPs per sample the newest that counted them counted, at the workload's own image
    size; the parameters and state of the newest that recorded its shape; the memory fit of the newest
    that fitted one across batch sizes, else of the newest that derived one (a training run)."""
    flops = next((r.flops_per_sample for r in results if r.flops_per_sample), float("nan"))
    shaped = next((r for r in results if getattr(r, "shape", None) is not None and r.shape.parameters is not None), None)
    # The newest probe that counted both FLOPs and the traffic of its ops without FLOPs gives the
    # split intensity (advisor/estimate/split.py); one from before result schema 6 counted every op's
    # bytes only, another quantity: its workload is unshaped until probed again.
    counted = next((r for r in results if r.flops_per_sample and getattr(r, "shape", None) is not None
                    and r.shape.other_traffic_bytes_per_sample), None)
    intensity = counted.flops_per_sample / counted.shape.other_traffic_bytes_per_sample if counted else None
    # The newest probe that counted its step's ops, at its own best batch.
    ops = next((r for r in results if getattr(r, "shape", None) is not None and r.shape.ops_per_step), None)
    dispatch = {"ops_per_step": ops.shape.ops_per_step, "ops_batch": ops.config.batch_size,
                "ops_loader_rate": ops.pipeline_samples_per_sec_per_worker if ops.config.num_workers == 0 else None,
                } if ops else {}
    measured = next((r.shape.activations for r in results
                     if getattr(r, "shape", None) is not None and getattr(r.shape, "activations", None) is not None), None)
    if measured is not None:
        dispatch["activations"] = measured
    if shaped is None:
        return WorkloadFacts(model, None, flops, float("nan"), 0.0, at_image_size=image_size, intensity=intensity,
                             **dispatch)
    s = shaped.shape
    # fp32 gradients beside the weights (what the all-reduce carries too), plus the optimizer's state.
    state = s.parameter_bytes + 4.0 * s.trainable_parameters + (s.optimizer_state_bytes or 0.0)
    fits = [r.shape.memory for r in results if getattr(r, "shape", None) is not None
            and r.shape.memory is not None and r.shape.memory.fixed_gib is not None]
    # A fit across batch sizes (a probe's) before one derived from a single batch (a training run's).
    fit = next((f for f in fits if not f.derived), fits[0] if fits else None)
    return WorkloadFacts(model, s.parameters, flops, float("nan"), 0.0, at_image_size=image_size,
                         state_bytes=state, memory=fit, best_batch=shaped.config.batch_size, intensity=intensity,
                         **dispatch)


FACTS: dict[str, WorkloadFacts] = {
    f.model: f
    for f in (
        WorkloadFacts("resnet50", 25_557_032, 24_299_077_632.0, 8_178_368_512.0, 90_221_994.0),
        WorkloadFacts("resnet18", 11_689_512, 10_648_412_160.0, 3_628_146_688.0, 23_246_250.0),
        WorkloadFacts("vit_b_16", 86_567_656, 105_867_085_824.0, 35_127_656_448.0, 289_570_002.0),
        # The probe's tiny MLP (lightning_module.run.workloads.build_net): backward skips the input
        # gradient, so training is ~2x, not 3x, the forward FLOPs.
        WorkloadFacts("mlp", 9_698_856, 38_919_168.0, 19_395_584.0, 734_378.0),
    )
}


def facts_for(model: str) -> WorkloadFacts | None:
    return FACTS.get(model)

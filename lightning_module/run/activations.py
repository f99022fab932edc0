"""Activation memory of a sequence model, counted per token and per layer (result.Activations).

Counted, not timed, on the CPU in a Trainer (its precision plugin's autocast, the module's own
training_step): during each step's forward every tensor autograd saves for backward is seen by a
saved_tensors_hooks pack hook; parameters are left out and each storage counted once, charged to
the layer whose forward was running (the layers: the longest nn.ModuleList or nn.Sequential whose
children are all of one class, a transformer's blocks) or to what is outside them. Each layer's
inputs are what activation checkpointing keeps of it. The first batch is cut to batch sizes 1 and
2 and to its full and half sequence length, so the per-token terms are fitted, not assumed
(contract/extrapolate.activation_terms).
"""

from __future__ import annotations

import logging

import torch
from lightning.pytorch.callbacks import Callback

from ..contract.extrapolate import activation_terms
from ..contract.result import ActivationPoint, Activations, ProbeConfig, WorkloadSpec
from .batches import first_tensor
from .builders import build_workload
from .layers import find_layers
from .peaks import fit_listed

log = logging.getLogger(__name__)


def cut(batch, b: int, s: int):
    """The batch's first b samples and first s positions: every tensor whose leading dimensions are
    the first tensor's [batch, sequence] is cut in both, one led by the batch in the batch only."""
    from lightning_utilities.core.apply_func import apply_to_collection

    t0 = first_tensor(batch)
    lead, seq = t0.shape[0], t0.shape[1]

    def one(t: torch.Tensor) -> torch.Tensor:
        if t.dim() >= 2 and t.shape[0] == lead and t.shape[1] == seq:
            return t[:b, :s]
        return t[:b] if t.dim() and t.shape[0] == lead else t

    return apply_to_collection(batch, torch.Tensor, one)


def _bytes(t: torch.Tensor) -> int:
    return t.untyped_storage().nbytes()


class _SavedBytes(Callback):
    """Per step: bytes saved for backward inside each layer and outside them, and the layers' input
    bytes; the first step is warm-up (lazy layers) and is dropped by the caller."""

    def __init__(self):
        self.steps: list[tuple[float, float, float, int]] = []  # per-layer saved, per-layer inputs, outside, layers
        self._ctx = None
        self._handles: list = []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        layers = find_layers(pl_module)
        params = {p.untyped_storage().data_ptr() for p in pl_module.parameters()}
        seen: set[int] = set()
        state = {"layer": None, "inside": 0, "outside": 0, "inputs": 0}

        def pack(t):
            ptr = t.untyped_storage().data_ptr()
            if ptr not in params and ptr not in seen:
                seen.add(ptr)
                state["inside" if state["layer"] is not None else "outside"] += _bytes(t)
            return t

        def pre(mod, args):
            state["layer"] = mod
            for a in args:
                if isinstance(a, torch.Tensor) and a.untyped_storage().data_ptr() not in seen:
                    state["inputs"] += a.numel() * a.element_size()

        def post(mod, args, out):
            state["layer"] = None

        self._handles = [h for m in layers for h in (m.register_forward_pre_hook(pre), m.register_forward_hook(post))]
        self._state, self._layers = state, len(layers)
        self._ctx = torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)
        self._ctx.__enter__()

    def on_before_backward(self, trainer, pl_module, loss):
        self._close()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self._close()

    def _close(self) -> None:
        if self._ctx is None:
            return
        self._ctx.__exit__(None, None, None)
        self._ctx = None
        for h in self._handles:
            h.remove()
        s, n = self._state, max(self._layers, 1)
        self.steps.append((s["inside"] / n, s["inputs"] / n, float(s["outside"]), self._layers))


def count_activations(spec: WorkloadSpec, batch, precision: str) -> Activations | None:
    """Activations of `spec`'s model on cuts of `batch` (a [batch, sequence] first tensor), or None
    (not a sequence batch, no repeated layers, or the count failed: said in the log)."""

    t0 = first_tensor(batch)
    if t0 is None or t0.dim() < 2 or t0.shape[1] < 2:
        return None
    lead, seq = t0.shape[0], t0.shape[1]
    shapes = sorted({(b, s) for b in (1, min(2, lead)) for s in (max(1, seq // 2), seq)})
    run_precision = "bf16-mixed" if precision == "16-mixed" else precision  # the CPU's half: the same bytes
    counter = _SavedBytes()
    try:
        module, dm = build_workload(spec, ProbeConfig(accelerator="cpu", batch_size=spec.batch_size))
        if not find_layers(module):
            return None
        steps = [cut(batch, *shapes[0])] + [cut(batch, b, s) for b, s in shapes]
        fit_listed(module, dm, steps, counter, run_precision)
    except Exception as e:  # noqa: BLE001 - optional: never fail the probe on it
        log.warning("activations not counted: %s: %s", type(e).__name__, str(e).splitlines()[0] if str(e) else "")
        return None
    finally:
        counter._close()
    got = counter.steps[1:]
    if len(got) != len(shapes) or len(shapes) < 2:
        return None
    layers = got[0][3]
    points = [ActivationPoint(batch_size=b, sequence_length=s, saved_bytes_per_layer=saved,
                              input_bytes_per_layer=inputs, saved_bytes_outside_layers=outside)
              for (b, s), (saved, inputs, outside, _) in zip(shapes, got)]
    fixed, per_token, per_position, note = activation_terms([(b, s, p) for (b, s), (p, _, _, _) in zip(shapes, got)])
    _, ckpt, _, _ = activation_terms([(b, s, i) for (b, s), (_, i, _, _) in zip(shapes, got)])
    _, outside, _, _ = activation_terms([(b, s, o) for (b, s), (_, _, o, _) in zip(shapes, got)])
    layer = type(find_layers(module)[0]).__name__
    return Activations(layer_class=layer, layers=layers, precision=run_precision, points=points,
                       bytes_per_token_per_layer=per_token, bytes_per_token_per_position_per_layer=per_position,
                       fixed_bytes_per_layer=fixed, checkpointed_bytes_per_token_per_layer=ckpt,
                       bytes_per_token_outside_layers=outside, note=note)

"""What a training step computes, moves and dispatches, counted one way whatever the kernels.

StepCounter is the probe's one counter of a step (run/peaks.py per_sample_counts, a training
run's first step, scripts/measure_workload_intensity.py). For every non-view aten op it counts:

- `flops`: matmul/conv FLOPs (torch.utils.flop_counter's formulas, 2 per MAC; a grouped
  convolution's backward counted right): the tensor-core-bound work;
- `bytes`: what the op reads and writes, unfused, and `matmul_bytes`, the share of it moved by the
  ops that have FLOPs; `other_bytes` (the rest: normalisation, softmax, elementwise) is the
  memory-bandwidth-bound work (advisor/estimate/split.py);
- `ops`: one per dispatched op, about one kernel launch each on a GPU: the host-bound work.

Fused ops are counted at their mathematics, not at the kernel the machine happened to pick:
F.scaled_dot_product_attention runs a fused kernel on one machine (dropout 0, flash or
memory-efficient) and an unfused chain of bmm/softmax/dropout on another (dropout > 0 on a CPU,
the math fallback), which read 20.7 and 13.7 FLOP/byte for one nn.TransformerEncoderLayer(256, 4,
1024). Counted here, attention is its mathematical FLOPs (QK^T and PV forward, twice that backward:
the unfused gradient's four products, not a flash kernel's recompute) and what a fused kernel
reads and writes (q, k, v and the mask in, the output out; backward q, k, v, the output and its
gradient in, their gradients out), one op each way. Dropout (F.dropout, and attention's own) is not
counted at all: a rate is a regularisation setting, not the workload's shape, and a compiled or
fused step applies its mask inside a neighbouring kernel. LayerNorm and GELU are one aten op each
on every backend, counted as they are; a recurrent layer (nn.LSTM, nn.GRU: one fused op per layer
and direction on a CPU) at its gates' matmul FLOPs; the optimizer's step is not counted
(per_sample_counts).
"""

from __future__ import annotations

import contextlib
import math

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes
from torch.utils._pytree import tree_flatten


def _conv_backward_flop(grad_out_shape, x_shape, w_shape, _bias, _stride, _padding, _dilation, transposed,
                        _output_padding, _groups, output_mask, out_shape=None, **kwargs) -> int:
    """A convolution's backward: the forward's FLOPs once for the input gradient and once for the
    weight gradient. torch's own formula ignores `groups` (a depthwise 3x3 backward over 64
    channels read 65x its forward, EfficientNet-B0 32 GFLOP per sample instead of ~2.4); the weight
    shape [out, in / groups, k...] already carries the grouping, so the forward's count is right."""
    from torch.utils.flop_counter import conv_flop_count

    once = conv_flop_count(list(x_shape), list(w_shape), list(grad_out_shape), transposed)
    return once * (int(bool(output_mask[0])) + int(bool(output_mask[1])))


def _rnn_layer_flop(x_shape, w_ih_shape, w_hh_shape, *_args, **_kwargs) -> int:
    """One fused recurrent layer over a sequence (the CPU's mkldnn_rnn_layer; an LSTM's on a GPU is
    cuDNN's): its gates' matmuls, input and recurrent, at every step, 2 per MAC. torch has no
    formula for it, so an LSTM counted 0 FLOPs and looked all memory-bound. The gates' arithmetic
    runs inside the kernel: its bytes are what the fused op reads and writes."""
    steps_by_batch = x_shape[0] * x_shape[1]
    return 2 * steps_by_batch * w_ih_shape[0] * (w_ih_shape[1] + w_hh_shape[1])


def _rnn_layer_backward_flop(x_shape, w_ih_shape, w_hh_shape, *_args, **_kwargs) -> int:
    """The fused layer's backward: the forward's FLOPs once for the input gradients and once for the weights'."""
    return 2 * _rnn_layer_flop(x_shape, w_ih_shape, w_hh_shape)


def flop_counter():
    """torch.utils.flop_counter.FlopCounterMode with the grouped-convolution backward counted right
    and the fused recurrent layer counted at all."""
    from torch.utils.flop_counter import FlopCounterMode

    return FlopCounterMode(display=False, custom_mapping={torch.ops.aten.convolution_backward: _conv_backward_flop,
                                                          torch.ops.aten.mkldnn_rnn_layer: _rnn_layer_flop,
                                                          torch.ops.aten.mkldnn_rnn_layer_backward: _rnn_layer_backward_flop})


def tensor_bytes(t: torch.Tensor) -> int:
    """What a tensor holds: a sparse one (an embedding's sparse=True gradient) its indices and
    values, not the dense size it stands for (a 10M-row table's gradient is a few rows)."""
    if t.layout == torch.sparse_coo:
        return tensor_bytes(t._indices()) + tensor_bytes(t._values())
    if t.layout != torch.strided:  # CSR and the like: their parts' storage
        return sum(tensor_bytes(p) for p in (t.crow_indices(), t.col_indices(), t.values())) \
            if t.layout == torch.sparse_csr else 0
    return t.numel() * t.element_size()


def _bytes_of(*tensors) -> int:
    return sum(tensor_bytes(t) for t in tensors if isinstance(t, torch.Tensor))


class StepCounter(TorchDispatchMode):
    """FLOPs, unfused memory traffic (split by what bounds it) and dispatched ops of what runs
    inside it; fused attention and dropout counted as the module docstring says, whatever kernel runs."""

    def __init__(self):
        super().__init__()
        self.flops = 0
        self.bytes = 0
        self.matmul_bytes = 0
        self.ops = 0
        self._registry = flop_counter().flop_registry
        self._patched: contextlib.ExitStack | None = None

    @property
    def other_bytes(self) -> int:
        """Bytes of the ops without FLOPs: normalisation, softmax, elementwise (bandwidth-bound)."""
        return self.bytes - self.matmul_bytes

    def add(self, flops: float, moved: int, ops: int) -> None:
        """A fused op's counts, worked out from its shapes (it ran uncounted)."""
        self.flops += flops
        self.bytes += moved
        self.matmul_bytes += moved if flops else 0
        self.ops += ops

    def __enter__(self):
        # The functions are replaced on torch.nn.functional itself: nn.MultiheadAttention and
        # nn.Dropout look them up there at call time (a torch function mode does not see the
        # call multi_head_attention_forward makes inside itself).
        self._patched = contextlib.ExitStack()
        for name, make in (("scaled_dot_product_attention", _attention), ("dropout", _dropout)):
            original = getattr(F, name)
            setattr(F, name, make(self, original))
            self._patched.callback(setattr, F, name, original)
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            if self._patched is not None:
                self._patched.close()
                self._patched = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if not getattr(func, "is_view", False):
            self.ops += 1
            moved = _bytes_of(*tree_flatten((args, kwargs, out))[0])
            self.bytes += moved
            formula = self._registry.get(func._overloadpacket)
            if formula is not None:
                self.flops += formula(*args, **kwargs, out_val=out)
                self.matmul_bytes += moved
        return out


class _Uncounted(torch.autograd.Function):
    """`fn` run with every counter paused (its graph kept for the backward, run paused as well);
    the counts the caller worked out for each direction added instead."""

    @staticmethod
    def forward(ctx, counter, fn, forward_counts, backward_counts, *tensors):
        with _disable_current_modes(), torch.enable_grad():
            inner = [t.detach().requires_grad_(t.requires_grad) for t in tensors]
            out = fn(*inner)
            ctx.inner, ctx.out, ctx.counter, ctx.backward_counts = inner, out, counter, backward_counts
            # In the layout the unfused math leaves it: a fused kernel's own (flash on a CPU writes
            # [batch, seq, heads, dim]) would make the next view copy, counted against the kernel.
            result = out.detach().contiguous()
        counter.add(*forward_counts)
        return result

    @staticmethod
    def backward(ctx, grad):
        wanted = [t for t in ctx.inner if t.requires_grad]
        with _disable_current_modes():
            grads = iter([g if g is None else g.contiguous()
                          for g in (torch.autograd.grad(ctx.out, wanted, grad, allow_unused=True) if wanted else ())])
        ctx.counter.add(*ctx.backward_counts)
        return (None, None, None, None, *[next(grads) if t.requires_grad else None for t in ctx.inner])


def attention_flops(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> float:
    """Forward FLOPs of attention: QK^T and PV over every query row (2 per MAC), whatever the
    mask or the kernel (a causal flash kernel skips half; the unfused math computes all)."""
    rows = math.prod(query.shape[:-1])
    return 2.0 * rows * key.shape[-2] * (query.shape[-1] + value.shape[-1])


def _attention(counter: StepCounter, original):
    def scaled_dot_product_attention(query, key, value, attn_mask=None, *args, **kwargs):
        mask = attn_mask if isinstance(attn_mask, torch.Tensor) else None
        if mask is not None and mask.requires_grad:  # a learnt mask: counted as it runs
            return original(query, key, value, attn_mask, *args, **kwargs)
        flops = attention_flops(query, key, value)
        out_bytes = tensor_bytes(query) // query.shape[-1] * value.shape[-1]  # the output's, as q's dtype
        qkv = _bytes_of(query, key, value, mask)
        forward = (flops, qkv + out_bytes, 1)
        # backward reads q, k, v, the mask, the output and its gradient; writes q, k and v's gradients
        backward = (2.0 * flops, qkv + 2 * out_bytes + _bytes_of(query, key, value), 1)
        tensors = (query, key, value)
        if not torch.is_grad_enabled() or not any(t.requires_grad for t in tensors):
            with _disable_current_modes():
                out = original(query, key, value, attn_mask, *args, **kwargs)
            counter.add(*forward)
            return out
        return _Uncounted.apply(counter, lambda q, k, v: original(q, k, v, attn_mask, *args, **kwargs),
                                forward, backward, *tensors)
    return scaled_dot_product_attention


def _dropout(counter: StepCounter, original):
    def dropout(input, p=0.5, training=True, inplace=False):  # noqa: A002 - F.dropout's signature, keywords too
        if not training or inplace or not isinstance(input, torch.Tensor):
            return original(input, p, training, inplace)  # nothing runs, or an in-place one: as it is
        # p == 0 too: a rate of 0 still runs a kernel on some backends (6 ops in one encoder layer's step)
        if not torch.is_grad_enabled() or not input.requires_grad:
            with _disable_current_modes():
                return original(input, p, training, inplace)
        return _Uncounted.apply(counter, lambda x: original(x, p, training, False), (0, 0, 0), (0, 0, 0), input)
    return dropout

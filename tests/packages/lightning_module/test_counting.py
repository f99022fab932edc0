"""One count whatever the kernel: fused attention and dropout (lightning_module/run/counting.py)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch.nn.attention import SDPBackend, sdpa_kernel

from lightning_module.run.counting import StepCounter, attention_flops, flop_counter


def _layer_counts(dropout: float, backend: SDPBackend | None) -> tuple[float, int, int, int]:
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(256, 4, 1024, dropout=dropout, batch_first=True)
    x = torch.randn(2, 64, 256)
    with (sdpa_kernel(backend) if backend is not None else torch.enable_grad()), StepCounter() as c:
        layer(x).sum().backward()
    return c.flops, c.bytes, c.other_bytes, c.ops


def test_an_encoder_layers_counts_do_not_depend_on_dropout_or_the_attention_kernel():
    """dropout 0 runs the fused (flash) kernel on a CPU, 0.1 the unfused math; both counted alike
    (the issue: 20.7 and 13.7 FLOP/byte for this layer before)."""
    counts = {(d, b): _layer_counts(d, b) for d in (0.0, 0.1) for b in (None, SDPBackend.MATH)}
    assert len(set(counts.values())) == 1, counts
    # Attention is counted at its mathematical FLOPs: what torch's own counter gives the unfused math.
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.1, batch_first=True)
    with sdpa_kernel(SDPBackend.MATH), flop_counter() as fc:
        layer(torch.randn(2, 64, 256)).sum().backward()
    assert counts[(0.0, None)][0] == fc.get_total_flops()


def test_fused_attention_moves_what_the_kernel_reads_and_writes_not_the_scores():
    q, k, v = (torch.randn(2, 4, 128, 32, requires_grad=True) for _ in range(3))
    with StepCounter() as c:
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=0.1)
    one = 2 * 4 * 128 * 32 * 4  # one of q, k, v or the output, fp32
    assert c.flops == attention_flops(q, k, v) == 2 * 2 * 4 * 128 * 128 * 64
    assert c.bytes == c.matmul_bytes == 4 * one and c.ops == 1  # no 128 x 128 score matrix
    fwd = (c.flops, c.matmul_bytes, c.ops)
    with StepCounter() as b:  # the backward is counted where its forward was (one step's counter)
        out.sum().backward()
    assert b.flops == 0
    # backward: 2x the forward's products; q, k, v, the output and its gradient in, three gradients out
    assert c.flops - fwd[0] == 2 * fwd[0]
    assert c.matmul_bytes - fwd[1] == 8 * one and c.ops == fwd[2] + 1
    assert q.grad is not None and k.grad is not None and v.grad is not None


def test_dropout_is_not_counted_and_its_gradient_still_flows():
    counts = []
    for p in (0.0, 0.5):
        x = torch.randn(8, 16, requires_grad=True)
        with StepCounter() as c:
            torch.nn.functional.dropout(x, p, training=True).sum().backward()
        counts.append((c.flops, c.bytes, c.ops))
        assert x.grad is not None and set(x.grad.unique().tolist()) <= {0.0, 1.0 / (1 - p)}
    # the sum and its gradient's ones: no dropout op, no mask's bytes, at either rate
    assert counts[0] == counts[1] and counts[0][2] <= 2 and counts[0][1] < 8 * 16 * 4 * 2


def test_a_recurrent_layer_is_counted_at_its_gates_matmuls_whatever_the_direction():
    """The CPU runs an nn.LSTM layer as one fused op per direction, for which torch has no FLOP
    formula: an LSTM counted 0 FLOPs and looked all memory-bound. Counted: 2 per MAC of the four
    gates' input and recurrent matmuls at every step, forward, and twice that backward."""
    steps, batch, inp, hidden = 7, 3, 16, 32
    for bidirectional in (False, True):
        lstm = torch.nn.LSTM(inp, hidden, batch_first=True, bidirectional=bidirectional)
        with StepCounter() as c:
            lstm(torch.randn(batch, steps, inp, requires_grad=True))[0].sum().backward()
        forward = 2 * steps * batch * 4 * hidden * (inp + hidden) * (2 if bidirectional else 1)
        assert c.flops == 3 * forward
        # the gates' arithmetic runs inside the fused op: its bytes are the matmul side's
        assert c.matmul_bytes > c.other_bytes

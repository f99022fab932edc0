"""Training memory per device of a transformer language model, by strategy: a ledger of terms,
each with its bytes and where they come from, not one fitted line.

State (weights, gradients, optimizer) is bytes per parameter by precision and optimizer
(advisor/data/training_memory.json, each figure sourced there), divided as the strategy shards it
over the devices: DDP replicates all (and its buckets copy the gradients); ZeRO-1 shards the
optimizer state, ZeRO-2 also the gradients, FSDP full shard / ZeRO-3 also the weights, holding the
unit it computes (one block, with the next prefetched) whole; hybrid shard does FSDP within one
instance and replicates across them. LoRA/QLoRA: a frozen base in 16 or 4 bits, adapters trained in
full at the precision's bytes.

Activations are counted from the shape tensor by tensor, what autograd keeps for backward
(the method of Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
Models", arXiv:2205.05198, section 4.1, for the kernels a Llama-style model runs today: fused
scaled-dot-product attention (no s x s matrix kept), no dropout in the blocks, norms that upcast
to fp32 as litgpt's and Hugging Face's RMSNorm do). With activation checkpointing each block keeps
its input only, and one block's whole set exists again while it is recomputed in backward. A
probe's measured bytes per token per layer replace the counted ones where a result has them.

Peak = the larger of (state + activations + the backward's first transient) and (state + the
optimizer step's temporaries); the CUDA context is added apart (`runtime_gib`) because the
published peaks (torch.cuda.max_memory_allocated) leave it out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from lightning_module.contract.transformer_shape import GATED, LAYERNORM, TransformerShape

DATA = Path(__file__).resolve().parents[1] / "data" / "training_memory.json"
GiB = 2**30

DDP, ZERO1, ZERO2, FSDP, HYBRID = "ddp", "zero1", "zero2", "fsdp", "hybrid"
STRATEGIES = (DDP, ZERO1, ZERO2, FSDP, HYBRID)
STRATEGY_WORDS = {DDP: "DDP", ZERO1: "ZeRO-1", ZERO2: "ZeRO-2", FSDP: "FSDP full shard", HYBRID: "FSDP hybrid shard"}
STRATEGY_ALIASES = {"zero3": FSDP, "fsdp_full": FSDP, "full_shard": FSDP, "hybrid_shard": HYBRID, "zero-1": ZERO1,
                    "zero-2": ZERO2, "zero-3": FSDP}
FULL, LORA, QLORA = "full", "lora", "qlora"
METHODS = (FULL, LORA, QLORA)
LORA_QV = ("q", "v")
LORA_ALL = ("q", "k", "v", "o", "gate", "up", "down", "fc", "proj", "head")  # litgpt's config_hub: every flag true
# A transformer job's defaults where the user or the probe says nothing (recommend --seq-len,
# --global-batch-tokens; a probed transformer without a sequence length): tokens per sequence,
# and tokens per optimizer step across all devices (how often gradients are exchanged).
DEFAULT_SEQ_LEN = 4096
DEFAULT_GLOBAL_BATCH_TOKENS = 2**20


class MemoryModelError(ValueError):
    """A training setup the memory model cannot count (unknown precision, optimizer or strategy)."""


@lru_cache(maxsize=1)
def constants() -> dict:
    return json.loads(DATA.read_text())


@dataclass(frozen=True)
class Training:
    """What is trained and how: the setup a user names (recommend --finetune, --precision ...)."""

    method: str = FULL
    precision: str = "bf16-true"
    optimizer: str = "adamw"
    checkpointing: bool = False  # activation checkpointing per block
    lora_rank: int = 8
    lora_targets: tuple[str, ...] = LORA_QV
    lora_dropout: bool = True  # the adapter keeps its dropped input and mask (litgpt, PEFT default > 0)
    eager_attention: bool = False  # the s x s probabilities kept (no fused attention kernel)
    double_quant: bool = True  # QLoRA: the quantization constants quantized again (nf4-dq)
    # Gradient accumulation under FSDP's no_sync() (FSDP1; what litgpt's finetune scripts do through
    # Fabric's no_backward_sync): every device holds the whole model's unsharded gradients between
    # the micro-batches of one optimizer step. False: the gradients are reduce-scattered after every
    # micro-batch (FSDP2's default, and what advisor/estimate/strategy.py's step time assumes).
    no_sync_accumulation: bool = False

    def __post_init__(self):
        c = constants()
        if self.method not in METHODS:
            raise MemoryModelError(f"unknown fine-tuning method {self.method!r}: one of {', '.join(METHODS)}")
        if self.precision not in c["bytes_per_param"]:
            raise MemoryModelError(f"unknown precision {self.precision!r}: one of {', '.join(c['bytes_per_param'])}")
        if self.optimizer not in c["optimizer_states"]:
            raise MemoryModelError(f"unknown optimizer {self.optimizer!r}: one of {', '.join(c['optimizer_states'])}")


@dataclass(frozen=True)
class Layout:
    """How the job is spread: the strategy over `devices` in all, `per_node` of them on one instance."""

    strategy: str = DDP
    devices: int = 1
    per_node: int = 1

    def __post_init__(self):
        if self.strategy not in STRATEGIES:
            raise MemoryModelError(f"unknown strategy {self.strategy!r}: one of {', '.join(STRATEGIES)}")

    def shards(self, what: str) -> int:
        """How many devices share `what` (weights, grads, optimizer)."""
        if self.devices == 1:
            return 1
        if self.strategy == HYBRID:
            return self.per_node
        rank = {DDP: 0, ZERO1: 1, ZERO2: 2, FSDP: 3}[self.strategy]
        need = {"optimizer": 1, "grads": 2, "weights": 3}[what]
        return self.devices if rank >= need else 1


@dataclass
class Term:
    name: str
    bytes: float
    source: str

    def as_dict(self) -> dict:
        return {"name": self.name, "gib": round(self.bytes / GiB, 3), "source": self.source}


@dataclass
class MemoryEstimate:
    """Peak memory of one device, term by term; `peak_bytes` excludes the CUDA context."""

    terms: list[Term]
    step_terms: list[Term]  # what the optimizer step adds on top of the state instead of the activations
    runtime: Term
    margin: Term  # what the counted tensors miss, as a share of the peak (calibrated)
    notes: list[str] = field(default_factory=list)

    def _sum(self, kinds) -> float:
        return sum(t.bytes for t in kinds)

    @property
    def state_bytes(self) -> float:
        return self._sum(t for t in self.terms if t.name.startswith("state:"))

    @property
    def peak_bytes(self) -> float:
        return max(self._sum(self.terms), self.state_bytes + self._sum(self.step_terms))

    @property
    def peak_gib(self) -> float:
        return self.peak_bytes / GiB

    @property
    def device_gib(self) -> float:
        """What the device must have: the peak, the calibrated share the count misses, and the
        runtime's own (CUDA context)."""
        return (self.peak_bytes * (1 + self.margin.bytes) + self.runtime.bytes) / GiB

    def as_dict(self) -> dict:
        return {"peak_gib": round(self.peak_gib, 3), "device_gib": round(self.device_gib, 3),
                "terms": [t.as_dict() for t in self.terms], "optimizer_step": [t.as_dict() for t in self.step_terms],
                "runtime": self.runtime.as_dict(),
                "margin": {"name": self.margin.name, "share": self.margin.bytes, "source": self.margin.source},
                "notes": list(self.notes)}


def _keeps_input(training: Training, name: str) -> bool:
    """Whether a block matrix's input is kept for backward: where its weight trains, and under
    QLoRA always (bitsandbytes' MatMul4Bit saves its input whenever any input needs a gradient:
    `if any(ctx.needs_input_grad[:2]): ctx.tensors = (A, B)`, bitsandbytes/autograd/_functions.py).
    A frozen 16-bit weight's gradient is not computed, so autograd does not keep its input."""
    return training.method in (FULL, QLORA)


def _adapter_bytes(training: Training, name: str, d_in: int) -> float:
    """What an adapter on this matrix keeps per token: its dropped input (bf16) and the dropout's
    bool mask, or with no dropout the input itself where the base linear does not keep it."""
    if training.method == FULL or name not in training.lora_targets:
        return 0.0
    if training.lora_dropout:
        return 3.0 * d_in
    return 0.0 if _keeps_input(training, name) else 2.0 * d_in


def activation_bytes_per_token_per_layer(shape: TransformerShape, training: Training, seq_len: int) -> tuple[float, str]:
    """Bytes one block keeps for backward per token, and the tensors counted."""
    h, f, q, kv = shape.d_model, shape.d_ff, shape.q_dim, shape.kv_dim
    full = training.method == FULL
    lin = shape.linears()

    def linear_inputs(names: tuple[str, ...]) -> float:
        """Matrices that read one tensor (q/k/v; gate/up): kept once, adapters apart."""
        kept = 2.0 * lin[names[0]][0] if any(_keeps_input(training, n) for n in names) else 0.0
        return kept + sum(_adapter_bytes(training, n, lin[n][0]) for n in names)

    # A norm that upcasts keeps its fp32 input; a trained RMSNorm weight also keeps the fp32
    # normalised tensor (litgpt's RMSNorm). torch's LayerNorm kernel keeps its bf16 input.
    norm = (2 * h if shape.norm == LAYERNORM else 4 * h + (4 * h if full else 0))
    norms = 1 if shape.shared_norm else 2
    # q, k, v as the attention kernel keeps them, its output and logsumexp (fp32 per head); the
    # output projection reads a contiguous copy of the output (transpose + reshape).
    attn = linear_inputs(("q", "k", "v")) + 2 * q + 4 * kv + 2 * q + 4 * shape.n_heads
    attn += linear_inputs(("o",))
    if training.eager_attention:
        attn += 2 * shape.n_heads * seq_len  # bf16 probabilities, kept for the product with V
    if shape.mlp == GATED:
        # the activation's input (gate out) and the product's two factors
        mlp = linear_inputs(("gate", "up")) + 2 * f + 4 * f + linear_inputs(("down",))
    else:
        mlp = linear_inputs(("fc",)) + 2 * f + linear_inputs(("proj",))  # GELU's input
    total = norms * norm + attn + mlp
    words = ("norm inputs, q/k/v and the attention output, the MLP's intermediate tensors"
             + {FULL: ", every linear's input (weights train)", LORA: ", the adapters' inputs",
                QLORA: ", every linear's input (bitsandbytes keeps it) and the adapters'"}[training.method]
             + ("; s x s probabilities" if training.eager_attention else ""))
    return total, words


def estimate(shape: TransformerShape, training: Training, layout: Layout, micro_batch: int, seq_len: int,
             measured_act_per_token_layer: float | None = None) -> MemoryEstimate:
    c = constants()
    prec = c["bytes_per_param"][training.precision]
    opt = c["optimizer_states"][training.optimizer]
    p_src, o_src = prec["source"], opt["source"]
    n_total = shape.params()
    terms: list[Term] = []
    notes: list[str] = []

    # -- what trains, what is frozen -----------------------------------------------------------
    if training.method == FULL:
        trained, frozen_bytes, frozen_src = n_total, 0.0, ""
    else:
        trained = shape.lora_params(training.lora_rank, training.lora_targets)
        if "head" in training.lora_targets:
            trained += training.lora_rank * (shape.d_model + shape.vocab)
        if training.method == LORA:
            frozen_bytes = n_total * 2.0
            frozen_src = "frozen base in 16 bits (2 bytes a parameter)"
        else:
            nf4 = c["nf4_bits_per_param"]
            lin = shape.linear_params()
            bits = nf4["value"] if training.double_quant else nf4["double_quant_off"]
            frozen_bytes = lin * bits / 8 + (n_total - lin) * 2.0
            frozen_src = (f"frozen block matrices in NF4 ({bits} bits a parameter: "
                          f"{nf4['source']}); embeddings, head and norms in 16 bits")
    ws, gs, os_ = layout.shards("weights"), layout.shards("grads"), layout.shards("optimizer")
    tokens = micro_batch * seq_len
    strategy = STRATEGY_WORDS[layout.strategy]

    if frozen_bytes:
        terms.append(Term("state: frozen base weights", frozen_bytes / ws,
                          frozen_src + (f", sharded over {ws}" if ws > 1 else "")))
    terms.append(Term("state: trained weights", trained * prec["weights"] / ws,
                      p_src + (f"; {strategy} shards over {ws}" if ws > 1 else "")))
    if prec["compute_copy"]:
        terms.append(Term("state: 16-bit weight copies", trained * prec["compute_copy"] / ws, p_src))
    terms.append(Term("state: gradients", trained * prec["grads"] / gs, p_src + (f"; sharded over {gs}" if gs > 1 else "")))
    state_el = opt["bytes_per_state"] or prec["state_element"]
    terms.append(Term("state: optimizer", trained * opt["states"] * state_el / os_,
                      o_src + (f"; sharded over {os_}" if os_ > 1 else "")))
    if layout.strategy == DDP and layout.devices > 1:
        b = c["ddp_bucket_copy"]
        terms.append(Term("state: DDP gradient buckets", trained * prec["grads"] * b["value"], b["source"]))
    if ws > 1:
        # FSDP gathers each block whole (compute dtype) while it runs, with the next one prefetched;
        # the root unit (embedding, head, final norm) stays gathered from the forward to the end of
        # the backward (FSDP does not reshard the root after forward), and its unsharded gradients
        # wait for the end of the backward to be reduce-scattered; a block's wait for its own end.
        units = c["fsdp_prefetch_units"]["value"]
        keep = 1 - 1 / ws  # what a device holds beyond its own shard
        wbytes = 4.0 if training.precision == "32-true" else 2.0
        terms.append(Term("state: gathered blocks", units * shape.block_params() * keep * wbytes,
                          c["fsdp_prefetch_units"]["source"]))
        terms.append(Term("state: gathered root unit", shape.embedding_params() * keep * wbytes,
                          "FSDP keeps the root unit (embedding, head, final norm: litgpt's auto_wrap_policy={Block} leaves "
                          "them to the root) unsharded from forward to the end of backward (torch FSDP: the root does not "
                          "reshard after forward)"))
        if training.no_sync_accumulation:
            # Not a state term: between optimizer steps the sharded gradients are freed (zero_grad)
            # while these live; the optimizer step sees the shard only.
            terms.append(Term("gradients: unsharded, held across the accumulation (no_sync)", trained * keep * prec["grads"],
                              c["fsdp_no_sync"]["source"]))
            # Each backward computes a unit's gradient whole and then adds it into the held one: the
            # root (embedding, head, final norm), the largest unit, is the biggest such transient.
            terms.append(Term("transient: the root unit's new gradient before it is accumulated",
                              shape.embedding_params() * prec["grads"], c["accumulate_grad"]["source"]))
        elif training.method == FULL:
            terms.append(Term("state: unsharded gradients (a block, the root)",
                              (shape.block_params() + shape.embedding_params()) * keep * prec["grads"],
                              "FSDP reduce-scatters a unit's gradients after its backward: a block's at a time, "
                              "the root's at the end"))
    if training.method == QLORA:
        terms.append(Term("transient: a dequantized block matrix", max(i * o for i, o in shape.linears().values()) * 2.0,
                          "bitsandbytes dequantizes one NF4 matrix to 16 bits for each matmul"))

    # -- activations ----------------------------------------------------------------------------
    counted, words = activation_bytes_per_token_per_layer(shape, training, seq_len)
    per_layer = measured_act_per_token_layer if measured_act_per_token_layer is not None else counted
    act_src = ("measured by the probe (bytes per token per layer)" if measured_act_per_token_layer is not None
               else f"counted from the shape: {words} (Korthikanti et al. 2022, arXiv:2205.05198, section 4.1, method)")
    if training.checkpointing:
        terms.append(Term("activations: block inputs (checkpointed)", shape.n_layers * tokens * 2 * shape.d_model,
                          "activation checkpointing keeps each block's bf16 input (Korthikanti et al. 2022: 2sbh per layer)"))
        terms.append(Term("activations: one block recomputed", tokens * per_layer, act_src + "; one block at a time in backward"))
    else:
        terms.append(Term("activations: blocks", shape.n_layers * tokens * per_layer, act_src))
    final_norm = 2 * shape.d_model if shape.norm == LAYERNORM else 4 * shape.d_model
    head_in = (2.0 * shape.d_model if training.method in (FULL, QLORA) else 0.0) + _adapter_bytes(training, "head", shape.d_model)
    terms.append(Term("activations: final norm and head input", tokens * (final_norm + head_in),
                      "the final norm's fp32 input; the head's bf16 input where it is kept (as a block matrix's)"))
    terms.append(Term("activations: logits and loss", tokens * shape.vocab * 4,
                      "bf16 logits and the bf16 log-softmax the cross-entropy keeps (2 + 2 bytes a vocabulary entry a token)"))
    terms.append(Term("transient: logits gradient", tokens * shape.vocab * 2,
                      "the first tensor of backward: the gradient of the logits, bf16, all tokens at once"))

    # -- the optimizer step (activations freed by then) ------------------------------------------
    step = ([Term("optimizer step temporaries", trained * state_el * opt["step_temporaries"] / os_, o_src)]
            if opt["step_temporaries"] else [])
    rt = c["cuda_context_gib"]
    notes.append(f"{shape.name}: {n_total / 1e9:.2f}B parameters, {trained / 1e6:.1f}M trained ({training.method}, "
                 f"{training.precision}, {training.optimizer}{', activation checkpointing' if training.checkpointing else ''}); "
                 f"{strategy} on {layout.devices} device(s), micro-batch {micro_batch} x {seq_len} tokens")
    fm = c["fit_margin"]
    return MemoryEstimate(terms, step, Term("CUDA context", rt["value"] * GiB, rt["source"]),
                          Term("uncounted share of the peak", fm["value"], fm["source"]), notes)


def largest_micro_batch(shape: TransformerShape, training: Training, layout: Layout, seq_len: int,
                        device_gib: float, cap: int = 1024, measured_act_per_token_layer: float | None = None) -> int:
    """The largest micro-batch whose peak fits on a device of `device_gib` (0: not even one sequence).
    Every activation term grows in proportion to the micro-batch and the state does not, so two
    estimates give the line; a third confirms the answer (and a fourth the next one's overflow)."""
    def need(b: int) -> float:
        return estimate(shape, training, layout, b, seq_len, measured_act_per_token_layer).device_gib

    if need(1) > device_gib:
        return 0
    e1, e2 = (estimate(shape, training, layout, b, seq_len, measured_act_per_token_layer) for b in (1, 2))
    slope = sum(t.bytes for t in e2.terms) - sum(t.bytes for t in e1.terms)
    base = sum(t.bytes for t in e1.terms) - slope
    room = (device_gib * GiB - e1.runtime.bytes) / (1 + e1.margin.bytes)
    b = cap if slope <= 0 else max(1, min(cap, int((room - base) // slope)))
    while b > 1 and need(b) > device_gib:  # guards the line against rounding
        b -= 1
    while b < cap and need(b + 1) <= device_gib:
        b += 1
    return b

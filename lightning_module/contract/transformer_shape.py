"""The shape of a decoder-only transformer language model, torch-free: what the training-memory
model (advisor/estimate/memory.py) counts bytes from, for a model too big to probe or one named by
`--model-shape`. A probe that built the model (on the meta device, issue 29's probe side) can fill
the same fields; a user can declare them.

Presets are read from litgpt's config table, which names each model's Hugging Face config.json
beside its entry: litgpt/config.py @ 0006c973aa7d6ace293e2a5fedaf1f8f804f960c
(https://github.com/Lightning-AI/litgpt/blob/0006c973aa7d6ace293e2a5fedaf1f8f804f960c/litgpt/config.py).
The vocabulary is litgpt's padded_vocab_size (the embedding and head rows it allocates). litgpt's
defaults fill what an entry leaves out (n_embd 4096, n_head 32, n_layer 16, MLP 4 x n_embd,
LayerNorm, bias, GptNeoxMLP).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

GATED, PLAIN = "gated", "plain"  # SwiGLU/GeGLU: three matrices; GELU: two
RMSNORM, LAYERNORM = "rmsnorm", "layernorm"


class ShapeError(ValueError):
    """A --model-shape that names no preset or says an impossible shape."""


@dataclass(frozen=True)
class TransformerShape:
    name: str
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_ff: int
    vocab: int
    head_dim: int = 0  # 0: d_model // n_heads
    mlp: str = GATED
    norm: str = RMSNORM
    tied_embeddings: bool = False  # one matrix for the embedding and the head
    bias: bool = False
    shared_norm: bool = False  # one norm feeds attention and MLP (parallel residual, phi/falcon)
    source: str = "declared"

    def __post_init__(self):
        for f in ("d_model", "n_layers", "n_heads", "n_kv_heads", "d_ff", "vocab"):
            if getattr(self, f) < 1:
                raise ShapeError(f"{f} must be at least 1, got {getattr(self, f)}")
        if self.n_heads % self.n_kv_heads:
            raise ShapeError(f"n_heads {self.n_heads} is not a multiple of n_kv_heads {self.n_kv_heads}")
        if self.mlp not in (GATED, PLAIN):
            raise ShapeError(f"mlp must be {GATED} or {PLAIN}, got {self.mlp!r}")
        if self.norm not in (RMSNORM, LAYERNORM):
            raise ShapeError(f"norm must be {RMSNORM} or {LAYERNORM}, got {self.norm!r}")
        if self.head_dim == 0:
            if self.d_model % self.n_heads:
                raise ShapeError(f"d_model {self.d_model} is not a multiple of n_heads {self.n_heads}: give head_dim")
            object.__setattr__(self, "head_dim", self.d_model // self.n_heads)

    @property
    def q_dim(self) -> int:
        return self.n_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.n_kv_heads * self.head_dim

    def linears(self) -> dict[str, tuple[int, int]]:
        """One block's weight matrices, (in, out) features each."""
        d, f = self.d_model, self.d_ff
        out = {"q": (d, self.q_dim), "k": (d, self.kv_dim), "v": (d, self.kv_dim), "o": (self.q_dim, d)}
        out.update({"gate": (d, f), "up": (d, f), "down": (f, d)} if self.mlp == GATED else {"fc": (d, f), "proj": (f, d)})
        return out

    def norm_params(self) -> int:
        return self.d_model * (2 if self.norm == LAYERNORM else 1)

    def block_params(self) -> int:
        """Parameters of one block: the unit FSDP wraps, gathers whole and frees."""
        lin = self.linears()
        weights = sum(i * o for i, o in lin.values())
        biases = sum(o for _, o in lin.values()) if self.bias else 0
        return weights + biases + self.norm_params() * (1 if self.shared_norm else 2)

    def linear_params(self) -> int:
        """The block matrices over all layers: what QLoRA stores in 4 bits."""
        return self.n_layers * sum(i * o for i, o in self.linears().values())

    def embedding_params(self) -> int:
        """Embedding + head (one matrix when tied) + the final norm."""
        return self.vocab * self.d_model * (1 if self.tied_embeddings else 2) + self.norm_params()

    def params(self) -> int:
        return self.n_layers * self.block_params() + self.embedding_params()

    def lora_params(self, rank: int, targets: tuple[str, ...]) -> int:
        """Adapter parameters: A (in x r) and B (r x out) on each targeted matrix of every block."""
        lin = self.linears()
        return self.n_layers * sum(rank * (lin[t][0] + lin[t][1]) for t in targets if t in lin)


_LITGPT = "litgpt/config.py @ 0006c973aa7d6ace293e2a5fedaf1f8f804f960c, entry "


def _preset(name, entry, hf, **kw) -> TransformerShape:
    return TransformerShape(name=name, source=f"{_LITGPT}{entry!r} (https://huggingface.co/{hf}/blob/main/config.json)", **kw)


PRESETS: dict[str, TransformerShape] = {s.name: s for s in (
    _preset("llama-2-7b", "Llama-2-7b{}-hf", "meta-llama/Llama-2-7b-hf", d_model=4096, n_layers=32, n_heads=32,
            n_kv_heads=32, d_ff=11008, vocab=32000),
    _preset("llama-2-13b", "Llama-2-13b{}-hf", "meta-llama/Llama-2-13b-hf", d_model=5120, n_layers=40, n_heads=40,
            n_kv_heads=40, d_ff=13824, vocab=32000),
    _preset("llama-2-70b", "Llama-2-70b{}-hf", "meta-llama/Llama-2-70b-hf", d_model=8192, n_layers=80, n_heads=64,
            n_kv_heads=8, d_ff=28672, vocab=32000),
    _preset("llama-3-8b", "Llama-3-8B{}", "meta-llama/Meta-Llama-3-8B", d_model=4096, n_layers=32, n_heads=32,
            n_kv_heads=8, d_ff=14336, vocab=128256),
    _preset("llama-3-70b", "Llama-3-70B{}", "meta-llama/Meta-Llama-3-70B", d_model=8192, n_layers=80, n_heads=64,
            n_kv_heads=8, d_ff=28672, vocab=128256),
    _preset("llama-3.2-1b", "Llama-3.2-1B{}", "meta-llama/Llama-3.2-1B", d_model=2048, n_layers=16, n_heads=32,
            n_kv_heads=8, d_ff=8192, vocab=128256),
    _preset("mistral-7b", "Mistral-7B-{}v0.1", "mistralai/Mistral-7B-v0.1", d_model=4096, n_layers=32, n_heads=32,
            n_kv_heads=8, d_ff=14336, vocab=32000),
    _preset("tiny-llama-1.1b", "tiny-llama-1.1b{}", "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T",
            d_model=2048, n_layers=22, n_heads=32, n_kv_heads=4, d_ff=5632, vocab=32000),
    _preset("qwen2.5-7b", "Qwen2.5-7B{}", "Qwen/Qwen2.5-7B", d_model=3584, n_layers=28, n_heads=28, n_kv_heads=4,
            d_ff=18944, vocab=152064),
    # Gemma: litgpt allocates a head of its own (no tying); GeGLU is a gated MLP.
    _preset("gemma-2b", "Gemma-2b", "google/gemma-2b", d_model=2048, n_layers=18, n_heads=8, n_kv_heads=1,
            d_ff=16384, vocab=256000),
    _preset("gemma-7b", "Gemma-7b", "google/gemma-7b", d_model=3072, n_layers=28, n_heads=16, n_kv_heads=16,
            head_dim=256, d_ff=24576, vocab=256000),
    _preset("phi-3-mini", "Phi-3-mini-4k-instruct", "microsoft/Phi-3-mini-4k-instruct", d_model=3072, n_layers=32,
            n_heads=32, n_kv_heads=32, d_ff=8192, vocab=32064),
    # GPT-NeoX-style entries: litgpt's defaults (LayerNorm, bias, GELU MLP of 4 x n_embd, n_head 32).
    _preset("phi-1.5", "phi-1_5", "microsoft/phi-1_5", d_model=2048, n_layers=24, n_heads=32, n_kv_heads=32,
            d_ff=8192, vocab=51200, mlp=PLAIN, norm=LAYERNORM, bias=True, shared_norm=True),
    _preset("phi-2", "phi-2", "microsoft/phi-2", d_model=2560, n_layers=32, n_heads=32, n_kv_heads=32,
            d_ff=10240, vocab=51200, mlp=PLAIN, norm=LAYERNORM, bias=True, shared_norm=True),
    _preset("stablelm-base-alpha-3b", "stablelm-base-alpha-3b", "stabilityai/stablelm-base-alpha-3b", d_model=4096,
            n_layers=16, n_heads=32, n_kv_heads=32, d_ff=16384, vocab=50688, mlp=PLAIN, norm=LAYERNORM, bias=True),
    _preset("falcon-7b", "falcon-7b{}", "tiiuae/falcon-7b", d_model=4544, n_layers=32, n_heads=71, n_kv_heads=1,
            d_ff=18176, vocab=65024, mlp=PLAIN, norm=LAYERNORM, shared_norm=True),
)}

_INT_FIELDS = {f.name for f in fields(TransformerShape) if f.type in ("int", int)}
_BOOL_FIELDS = {"tied_embeddings", "bias", "shared_norm"}


def parse_shape(text: str) -> TransformerShape:
    """`--model-shape`: a preset name (llama-3-8b), a preset with fields changed
    (llama-3-8b,n_layers=40), or every field declared (d_model=4096,n_layers=32,n_heads=32,
    n_kv_heads=8,d_ff=14336,vocab=128256[,mlp=gated,norm=rmsnorm,tied_embeddings=false])."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise ShapeError("--model-shape is empty: give a preset (" + ", ".join(sorted(PRESETS)) + ") or key=value fields")
    base, given = None, {}
    for p in parts:
        if "=" not in p:
            if base is not None or p.lower() not in PRESETS:
                raise ShapeError(f"unknown model shape {p!r}: presets are " + ", ".join(sorted(PRESETS)))
            base = PRESETS[p.lower()]
            continue
        k, _, v = (s.strip() for s in p.partition("="))
        if k in _INT_FIELDS:
            try:
                given[k] = int(float(v)) if float(v).is_integer() else None
            except ValueError:
                given[k] = None
            if given[k] is None:
                raise ShapeError(f"{k} must be a whole number, got {v!r}")
        elif k in _BOOL_FIELDS:
            if v.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise ShapeError(f"{k} must be true or false, got {v!r}")
            given[k] = v.lower() in ("true", "1", "yes")
        elif k in ("mlp", "norm", "name"):
            given[k] = v.lower() if k != "name" else v
        else:
            raise ShapeError(f"unknown model-shape field {k!r}")
    if base is not None:
        name = given.pop("name", base.name + ("*" if given else ""))
        return replace(base, name=name,
                       source=base.source + (" with " + ", ".join(f"{k}={v}" for k, v in given.items()) if given else ""),
                       **given)
    missing = [f for f in ("d_model", "n_layers", "n_heads", "d_ff", "vocab") if f not in given]
    if missing:
        raise ShapeError("a declared model shape needs " + ", ".join(missing))
    given.setdefault("n_kv_heads", given["n_heads"])
    return TransformerShape(**{"name": "declared", **given})

#!/usr/bin/env python3
"""The arithmetic intensity of every workload the estimator knows: the builtins and the
reference dataset's, counted the way the probe counts a user's own model.

The probe (lightning_module/run/peaks.py per_sample_counts) runs training steps on the CPU under
its StepCounter (lightning_module/run/counting.py: matmul/conv FLOPs, 2 per MAC, a grouped
convolution's backward counted right; the bytes every aten op reads and writes, unfused, fp32, and
the part of them the ops without FLOPs move; fused attention at its mathematical FLOPs and a fused
kernel's traffic, dropout not counted, whatever kernel runs): FLOPs per sample over FLOP_SAMPLES
samples, bytes per additional sample between FLOP_SAMPLES and twice that (a step's weight
traffic is its batch's). This script does the same for each workload's torch definition, random
init, no weights and no download: torchvision's for the ResNets, ViT-B/16 and EfficientNets; a
torchvision ResNet with groups=32, width 4 for ResNeXt101-32x4d, plus a squeeze-excitation block for
SE-ResNeXt101-32x4d; a BERT encoder written here from nn.TransformerEncoderLayer. Workloads whose
definition the dataset does not pin down are listed as unshaped with the reason.

Run (a few minutes on 2 CPU cores):
    .venv/bin/python scripts/measure_workload_intensity.py > advisor/data/workload_intensity.json
`advisor recommend` reads that file (advisor/estimate/shapes.py) and never imports torch.
"""

from __future__ import annotations

import json
import sys
import warnings

import torch
import torchvision
import torchvision.models as tvm
from torch import nn
from torchvision.models.resnet import Bottleneck, ResNet

from lightning_module.contract.result import WorkloadSpec
from lightning_module.run.counting import StepCounter
from lightning_module.run.peaks import FLOP_SAMPLES, per_sample_traffic
from lightning_module.run.workloads import build_net

IMAGE = 224
CLASSES = 1000
BERT_VOCAB = 30522  # bert-*-uncased's WordPiece vocabulary


class SEBottleneck(Bottleneck):
    """torchvision's bottleneck with a squeeze-excitation block (reduction 16) before the residual add."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        c = self.conv3.out_channels
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(c, c // 16, 1), nn.ReLU(inplace=True),
                                nn.Conv2d(c // 16, c, 1), nn.Sigmoid())

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out * self.se(out) + identity)


class Bert(nn.Module):
    """BERT: token + position + segment embeddings, post-LN encoder layers with GELU, and a head
    (SQuAD: start/end logits; pre-training: the MLM head over the vocabulary on every token + NSP)."""

    def __init__(self, hidden: int, layers: int, heads: int, seq: int, head: str):
        super().__init__()
        self.seq, self.head_kind = seq, head
        self.tok = nn.Embedding(BERT_VOCAB, hidden)
        self.pos = nn.Embedding(512, hidden)
        self.seg = nn.Embedding(2, hidden)
        self.norm = nn.LayerNorm(hidden)
        layer = nn.TransformerEncoderLayer(hidden, heads, 4 * hidden, activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        if head == "squad":
            self.out = nn.Linear(hidden, 2)
        else:
            self.out = nn.Sequential(nn.Linear(hidden, hidden), nn.GELU(), nn.LayerNorm(hidden), nn.Linear(hidden, BERT_VOCAB))
            self.nsp = nn.Linear(hidden, 2)

    def loss(self, n: int) -> torch.Tensor:
        ids = torch.randint(0, BERT_VOCAB, (n, self.seq))
        pos = torch.arange(self.seq).expand(n, -1)
        h = self.encoder(self.norm(self.tok(ids) + self.pos(pos) + self.seg(torch.zeros_like(ids))))
        ce = nn.functional.cross_entropy
        if self.head_kind == "squad":
            start, end = self.out(h).unbind(-1)
            return ce(start, torch.zeros(n, dtype=torch.long)) + ce(end, torch.zeros(n, dtype=torch.long))
        logits = self.out(h)
        return ce(logits.reshape(-1, BERT_VOCAB), ids.reshape(-1)) + ce(self.nsp(h[:, 0]), torch.zeros(n, dtype=torch.long))


def image_loss(net: nn.Module, size: int = IMAGE):
    def loss(n: int) -> torch.Tensor:
        x = torch.randn(n, 3, size, size)
        return nn.functional.cross_entropy(net(x), torch.randint(0, CLASSES, (n,)))
    loss.module = net
    return loss


def builtin(name: str):
    return image_loss(build_net(WorkloadSpec(model=name, image_size=IMAGE, num_classes=CLASSES)).train())


# workload -> (how its definition was built, a function of n samples returning the loss)
DEFINITIONS = {
    "resnet18": ("torchvision resnet18 (the probe's builtin), 224 px", lambda: builtin("resnet18")),
    "resnet34": ("torchvision resnet34, 224 px", lambda: image_loss(tvm.resnet34(weights=None))),
    "resnet50": ("torchvision resnet50 (the probe's builtin), 224 px", lambda: builtin("resnet50")),
    "resnet101": ("torchvision resnet101, 224 px", lambda: image_loss(tvm.resnet101(weights=None))),
    "vit_b_16": ("torchvision vit_b_16 (the probe's builtin), 224 px", lambda: builtin("vit_b_16")),
    "mlp": ("the probe's builtin MLP (lightning_module.run.workloads.build_net), 224 px", lambda: builtin("mlp")),
    "efficientnet-b0": ("torchvision efficientnet_b0, 224 px", lambda: image_loss(tvm.efficientnet_b0(weights=None))),
    "efficientnet-b4": (("torchvision efficientnet_b4, 224 px (intensity: FLOPs and activation traffic both "
                        "grow with the pixel count)"), lambda: image_loss(tvm.efficientnet_b4(weights=None))),
    "resnext101-32x4d": ("torchvision ResNet(Bottleneck, [3, 4, 23, 3], groups=32, width_per_group=4), 224 px",
                         lambda: image_loss(ResNet(Bottleneck, [3, 4, 23, 3], groups=32, width_per_group=4))),
    "se-resnext101-32x4d": (("the ResNeXt101-32x4d above with a squeeze-excitation block (reduction 16) in every "
                            "bottleneck, written in scripts/measure_workload_intensity.py, 224 px"),
                            lambda: image_loss(ResNet(SEBottleneck, [3, 4, 23, 3], groups=32, width_per_group=4))),
    "bert-large": (("BERT-Large (24 layers, 1024 hidden, 16 heads) with the SQuAD span head at sequence length 384 "
                   "(DLE run_squad's default, as the rows' notes say), written in the script"),
                   lambda: Bert(1024, 24, 16, 384, "squad").loss),
    "bert-base": (("BERT-Base (12 layers, 768 hidden, 12 heads) with the SQuAD span head at sequence length 384 "
                  "(DLE run_squad's default, as the rows' notes say), written in the script"),
                  lambda: Bert(768, 12, 12, 384, "squad").loss),
    "bert-large-pretrain-seq128": (("BERT-Large with the MLM (every token) + NSP heads at sequence length 128 "
                                   "(the rows' workload), written in the script"),
                                   lambda: Bert(1024, 24, 16, 128, "pretrain").loss),
}
UNSHAPED = {
    "bert-base-pretrain": "its source does not state the sequence length, which sets the attention share",
    "bridgetower-large-finetune": "an image-text model (866M parameters) with no definition here; its source "
                                  "names no configuration to rebuild it from",
    "t5-3b-finetune": "a 3B-parameter encoder-decoder with gradient checkpointing (recomputed activations): "
                      "no definition here",
    # The workload families added in reference schema 3 (issue 31): detection, translation,
    # recommender, speech, decoder language models.
    "ssd300": "DeepLearningExamples' SSD300 v1.1 has a ResNet-50 backbone and its own heads; torchvision ships only "
              "the VGG-16 SSD300, and no definition is written here yet",
    "gnmt": "an LSTM encoder-decoder with attention over variable-length WMT16 sentences, its rate in tokens: its "
            "source fixes no sequence length to count at",
    "ncf": "NeuMF's embedding tables (users x items of MovieLens-20M) and MLP sizes are DeepLearningExamples' "
           "defaults, not read into this project yet; a gather-bound recommender whose traffic the per-sample "
           "count would need them for",
    "tacotron2": "an autoregressive LSTM decoder over mel frames (its rate in frames): no definition here",
    "waveglow": "a flow over audio samples (its rate in audio samples): no definition here",
    "transformer-xl-base": "its segment and memory lengths are set by the benchmark suite's config per GPU memory, "
                           "not stated per row; no definition here yet",
    "transformer-xl-large": "its segment and memory lengths are set by the benchmark suite's config per GPU memory, "
                            "not stated per row; no definition here yet",
} | {f"mpt-{size}": "its rows are sharded (FSDP) runs, held out of the fit; a decoder's count waits for fused "
                    "attention counted at its mathematical FLOPs (issue 31)"
     for size in ("125m", "350m", "760m", "1b", "3b", "7b", "13b", "30b", "70b")}


def count(loss_of) -> tuple[float, float, float]:
    """(train FLOPs, memory traffic bytes, the traffic of the ops without FLOPs) per sample, as the
    probe counts: FLOPs over FLOP_SAMPLES samples, traffic per additional sample between
    FLOP_SAMPLES and twice that (per_sample_traffic)."""
    module = getattr(loss_of, "module", None) or loss_of.__self__

    def once(n: int) -> StepCounter:
        module.zero_grad(set_to_none=True)  # a second backward would add into the first's gradients
        torch.manual_seed(0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with StepCounter() as c:
                loss_of(n).backward()
        return c

    small, large = once(FLOP_SAMPLES), once(2 * FLOP_SAMPLES)
    pair = ((FLOP_SAMPLES, small), (2 * FLOP_SAMPLES, large))
    return (small.flops / FLOP_SAMPLES, per_sample_traffic(*((n, c.bytes) for n, c in pair)),
            per_sample_traffic(*((n, c.other_bytes) for n, c in pair)))


def main() -> None:
    names = sys.argv[1:] or list(DEFINITIONS)
    out = {}
    for name in names:
        how, make = DEFINITIONS[name]
        f, b, o = count(make())
        out[name] = {"train_flops_per_sample": f, "traffic_bytes_per_sample": b, "other_traffic_bytes_per_sample": o,
                     "intensity": round(f / b, 3), "split_intensity": round(f / o, 3),
                     "derived": f"counted by scripts/measure_workload_intensity.py: {how}; forward + backward on "
                                f"{FLOP_SAMPLES} and {2 * FLOP_SAMPLES} samples under the probe's StepCounter "
                                "(lightning_module/run/counting.py: matmul/conv/attention FLOPs, unfused fp32 bytes, "
                                "fused attention and dropout counted one way whatever the kernel); FLOPs per sample, "
                                "bytes per additional sample (what a step moves once, its weights, is shared by its "
                                "batch); intensity = FLOPs / bytes; split_intensity = FLOPs / the bytes of the ops "
                                "without FLOPs (advisor/estimate/split.py)"}
        print(f"{name}: {f / 1e9:.2f} GFLOP, {b / 1e9:.2f} GB ({o / 1e9:.2f} GB other), intensity {f / b:.2f}, "
              f"split {f / o:.2f}", file=sys.stderr)
    json.dump({"about": "Arithmetic intensity (training FLOPs per byte of memory traffic, per sample) of the "
                        "workloads the cross-device model knows, counted as the probe counts a user's model. "
                        "Regenerate with scripts/measure_workload_intensity.py.",
               "measured_with": f"torch {torch.__version__}, torchvision {torchvision.__version__}",
               "workloads": out, "unshaped": UNSHAPED}, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()

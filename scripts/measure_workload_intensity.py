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
or recount some workloads in place, the others kept:
    .venv/bin/python scripts/measure_workload_intensity.py --write gnmt tacotron2
`advisor recommend` reads that file (advisor/estimate/shapes.py) and never imports torch.
"""

from __future__ import annotations

import json
import sys
import warnings

import intensity_families as fam  # scripts/, the script's own directory, is on its path
import torch
import torchvision
import torchvision.models as tvm
from torch import nn
from torchvision.models.resnet import Bottleneck, ResNet

from advisor.estimate.shapes import INTENSITY_PATH
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
# The families reference schema 3 added (issue 31), from scripts/intensity_families.py (each size
# and count sourced there): workload -> (how, its definition, the device it is counted on). The meta
# device runs shapes only: the same counts as the CPU for convolutions, linear layers, attention,
# norms and embeddings (tests/packages/lightning_module/run/test_counting.py), in seconds where the
# CPU would take an hour; the recurrent ones on the CPU, which runs an LSTM layer as one fused op.
FAMILIES = {
    "ssd300": (("DeepLearningExamples' SSD300 v1.1 (ResNet-50 to layer3, strides 1 in conv4_block1, five extra blocks, "
               "8732 boxes, 81 classes) at 300 px with its hard-negative-mining loss, written in "
               "scripts/intensity_families.py (DLE's con_neg[mask] = 0 as a masked fill: the same bytes, no "
               "data-dependent shape)"), fam.SSD300, "meta"),
    "ncf": (("DeepLearningExamples' NeuMF (64 factors, MLP 256-256-128-64) on MovieLens-20M's 138,493 users and 26,744 "
            "items, BCE with logits, a sample one user-item pair, written in scripts/intensity_families.py"), fam.NeuMF,
            "meta"),
    "gnmt": (("DeepLearningExamples' GNMT v2 (1024 hidden, 4 LSTM layers each side, the first bidirectional, normalised "
             "Bahdanau attention, 32,000-token shared vocabulary) at its --train-max-length of 50 tokens each side, "
             "written in scripts/intensity_families.py"), fam.GNMT, "cpu"),
    "tacotron2": (("DeepLearningExamples' Tacotron 2 (its arg_parser sizes) over one LJSpeech clip of the mean length, "
                  "100 characters and 566 mel frames (derived from the dataset's statistics and DLE's 22,050 Hz, hop "
                  "256; counted at 8 and 16 frames and extended linearly, exact: only the encoder is per clip), "
                  "teacher-forced, each LSTM cell as the fused one-step layer a GPU runs, written in "
                  "scripts/intensity_families.py"), fam.Tacotron2, "cpu"),
    "waveglow": (("DeepLearningExamples' WaveGlow (12 flows, groups of 8, WN 8 layers x 512 channels, kernel 3) on "
                 "Lambda's --segment-length 8000, written in scripts/intensity_families.py"), fam.WaveGlow, "meta"),
    "transformer-xl-base": (("DeepLearningExamples' Transformer-XL as Lambda runs it (16 layers, d_model 512, 8 heads x 64, "
                            "d_inner 2048, segment and memory 192, the full tied softmax over 267,735 words), written in "
                            "scripts/intensity_families.py"), lambda: fam.TransformerXL("transformer-xl-base"), "meta"),
    "transformer-xl-large": (("DeepLearningExamples' Transformer-XL as Lambda runs it (18 layers, d_model 1024, 16 heads x "
                             "64, d_inner 4096, segment and memory 256, the full tied softmax over 267,735 words), written "
                             "in scripts/intensity_families.py"), lambda: fam.TransformerXL("transformer-xl-large"), "meta"),
} | {name: ((f"llm-foundry's {name.upper()} (d_model {d}, {h} heads, {n} layers, a 2048-token sequence, vocabulary "
            "50,368, tied output; its parameters the rows' NumParams exactly), written in scripts/intensity_families.py"),
            lambda name=name: fam.MPT(name), "meta") for name, (d, h, n) in fam.MPT_SIZES.items()}
UNSHAPED = {
    "bert-base-pretrain": "its source does not state the sequence length, which sets the attention share",
    "bridgetower-large-finetune": "an image-text model (866M parameters) with no definition here; its source "
                                  "names no configuration to rebuild it from",
    "t5-3b-finetune": "a 3B-parameter encoder-decoder with gradient checkpointing (recomputed activations): "
                      "no definition here",
}


def count(loss_of, device: str = "cpu") -> tuple[float, float, float]:
    """(train FLOPs, memory traffic bytes, the traffic of the ops without FLOPs) per sample, as the
    probe counts: FLOPs over FLOP_SAMPLES samples, traffic per additional sample between
    FLOP_SAMPLES and twice that (per_sample_traffic). `device`: where the step runs (its module
    was built there)."""
    module = getattr(loss_of, "module", None) or loss_of.__self__

    def once(n: int) -> StepCounter:
        module.zero_grad(set_to_none=True)  # a second backward would add into the first's gradients
        torch.manual_seed(0)
        with warnings.catch_warnings(), torch.device(device):
            warnings.simplefilter("ignore")
            with StepCounter() as c:
                loss_of(n).backward()
        return c

    small, large = once(FLOP_SAMPLES), once(2 * FLOP_SAMPLES)
    pair = ((FLOP_SAMPLES, small), (2 * FLOP_SAMPLES, large))
    return (small.flops / FLOP_SAMPLES, per_sample_traffic(*((n, c.bytes) for n, c in pair)),
            per_sample_traffic(*((n, c.other_bytes) for n, c in pair)))


# Counted at two lengths and extended along the line to the workload's own (every part of the
# step but a fixed one grows linearly with it, so the extension is exact): a 566-frame Tacotron 2
# decoder stepped under the counter takes an hour on 2 CPU cores, 8 and 16 frames a few minutes.
LINEAR = {"tacotron2": (lambda frames: fam.Tacotron2(frames), (8, 16), fam.TACO_FRAMES)}


def count_linear(name: str) -> tuple[float, float, float]:
    """count() at LINEAR's two lengths, each figure extended linearly to the workload's length."""
    make, (a, b), target = LINEAR[name]
    lo, hi = count(make(a).loss), count(make(b).loss)
    return tuple(x + (y - x) * (target - a) / (b - a) for x, y in zip(lo, hi))


def definition(name: str):
    """(how it was built, its loss function, the device it is counted on) for a workload name."""
    if name in LINEAR:
        return FAMILIES[name][0], None, "cpu"
    if name in FAMILIES:
        how, make, device = FAMILIES[name]
        with torch.device(device):
            return how, make().loss, device
    how, make = DEFINITIONS[name]
    return how, make(), "cpu"


def main() -> None:
    args = sys.argv[1:]
    write = "--write" in args  # update the named entries in place (the rest kept as they are)
    names = [a for a in args if a != "--write"] or [*DEFINITIONS, *FAMILIES]
    out = json.loads(INTENSITY_PATH.read_text(encoding="utf-8"))["workloads"] if write else {}
    for name in names:
        how, loss_of, device = definition(name)
        f, b, o = count_linear(name) if name in LINEAR else count(loss_of, device)
        where = "" if device == "cpu" else f" (on the {device} device: shapes only, the CPU's counts)"
        out[name] = {"train_flops_per_sample": f, "traffic_bytes_per_sample": b, "other_traffic_bytes_per_sample": o,
                     "intensity": round(f / b, 3), "split_intensity": round(f / o, 3),
                     "derived": f"counted by scripts/measure_workload_intensity.py: {how}; forward + backward on "
                                f"{FLOP_SAMPLES} and {2 * FLOP_SAMPLES} samples{where} under the probe's StepCounter "
                                "(lightning_module/run/counting.py: matmul/conv/attention/recurrent FLOPs, unfused fp32 "
                                "bytes, fused attention and dropout counted one way whatever the kernel); FLOPs per "
                                "sample, bytes per additional sample (what a step moves once, its weights, is shared by "
                                "its batch); intensity = FLOPs / bytes; split_intensity = FLOPs / the bytes of the ops "
                                "without FLOPs (advisor/estimate/split.py)"}
        print(f"{name}: {f / 1e9:.2f} GFLOP, {b / 1e9:.2f} GB ({o / 1e9:.2f} GB other), intensity {f / b:.2f}, "
              f"split {f / o:.2f}", file=sys.stderr)
    body = {"about": "Arithmetic intensity (training FLOPs per byte of memory traffic, per sample) of the "
                     "workloads the cross-device model knows, counted as the probe counts a user's model. "
                     "Regenerate with scripts/measure_workload_intensity.py.",
            "measured_with": f"torch {torch.__version__}, torchvision {torchvision.__version__}",
            "workloads": out, "unshaped": {k: v for k, v in UNSHAPED.items() if k not in out}}
    text = json.dumps(body, indent=2) + "\n"
    if write:
        INTENSITY_PATH.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()

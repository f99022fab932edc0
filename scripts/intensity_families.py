"""Torch definitions of the workload families reference schema 3 added (issue 31), for
scripts/measure_workload_intensity.py to count under the probe's StepCounter.

Each is written from its benchmark's own code and the arguments the benchmark ran it with; only
the shapes matter (random init, no weights, no data), and only what a training step computes per
sample: a table's size enters its per-step gradient, not the per-sample count (the script takes
bytes per additional sample). Sources, each for the figures next to it:

- DLE = NVIDIA/DeepLearningExamples (PyTorch), the code Lambda's suite runs;
- LAMBDA = lambdal/deeplearning-benchmark pytorch/scripts/config_v1/config_pytorch_80GB.sh
  @357c49a7cc7eaff2c74614f7dbc4a72800ba350f, the arguments of its v1 runs (the rows' CSV).

A sample is the rows' rate unit (an image, a token, a user-item pair, a mel frame, an audio
sample): intensity is FLOPs per byte, so the unit cancels; a loss function of n returns the loss
of n sequences (or clips), and the script's per-sample figures are per sequence.
"""

from __future__ import annotations

import itertools
import math

import torch
from torch import nn
from torch.nn import functional as F
from torchvision.models import resnet50

# --- SSD300 v1.1 (DLE PyTorch/Detection/SSD/ssd/model.py @04099020ae68b5767bf5c74db3dcace0c215c730) ---
SSD_IMAGE = 300  # the model's name and its 38x38 first feature map
SSD_LABELS = 81  # SSD300.label_num, COCO's 80 classes and background
SSD_DEFAULTS = (4, 6, 6, 6, 4, 4)  # SSD300.num_defaults
SSD_CHANNELS = (1024, 512, 512, 256, 256, 256)  # ResNet('resnet50').out_channels
SSD_MIDDLE = (256, 256, 128, 128, 128)  # _build_additional_features' channels


class SSD300(nn.Module):
    """DLE's SSD300: torchvision ResNet-50 to layer3 with conv4_block1's strides 1, five extra
    blocks, 3x3 loc and conf heads over six feature maps (8732 boxes); its loss, SmoothL1 on the
    positives and cross-entropy with hard negative mining (3 negatives per positive)."""

    def __init__(self):
        super().__init__()
        trunk = resnet50(weights=None)
        self.features = nn.Sequential(*list(trunk.children())[:7])
        block = self.features[-1][0]
        block.conv1.stride = block.conv2.stride = block.downsample[0].stride = (1, 1)
        extra = []
        for i, (cin, cout, mid) in enumerate(zip(SSD_CHANNELS[:-1], SSD_CHANNELS[1:], SSD_MIDDLE)):
            last = {"padding": 1, "stride": 2} if i < 3 else {}
            extra.append(nn.Sequential(nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
                                       nn.Conv2d(mid, cout, 3, bias=False, **last), nn.BatchNorm2d(cout),
                                       nn.ReLU(inplace=True)))
        self.extra = nn.ModuleList(extra)
        self.loc = nn.ModuleList(nn.Conv2d(c, d * 4, 3, padding=1) for d, c in zip(SSD_DEFAULTS, SSD_CHANNELS))
        self.conf = nn.ModuleList(nn.Conv2d(c, d * SSD_LABELS, 3, padding=1) for d, c in zip(SSD_DEFAULTS, SSD_CHANNELS))

    def loss(self, n: int) -> torch.Tensor:
        x = self.features(torch.randn(n, 3, SSD_IMAGE, SSD_IMAGE))
        feed = [x]
        for block in self.extra:
            feed.append(block(feed[-1]))
        locs = torch.cat([lo(s).reshape(n, 4, -1) for s, lo in zip(feed, self.loc)], 2).contiguous()
        confs = torch.cat([c(s).reshape(n, SSD_LABELS, -1) for s, c in zip(feed, self.conf)], 2).contiguous()
        boxes = locs.shape[2]
        glabel = torch.randint(0, SSD_LABELS, (n, boxes))
        gloc = torch.rand(n, 4, boxes) + 0.1
        dboxes = torch.rand(1, 4, boxes) + 0.1
        # DLE's Loss.forward, as written there
        mask = glabel > 0
        pos_num = mask.sum(dim=1)
        vec_gd = torch.cat((10.0 * (gloc[:, :2] - dboxes[:, :2]) / dboxes[:, 2:],
                            5.0 * (gloc[:, 2:] / dboxes[:, 2:]).log()), dim=1).contiguous()
        sl1 = (mask.float() * F.smooth_l1_loss(locs, vec_gd, reduction="none").sum(dim=1)).sum(dim=1)
        con = F.cross_entropy(confs, glabel, reduction="none")
        con_neg = con.clone()
        con_neg[mask] = 0
        _, con_idx = con_neg.sort(dim=1, descending=True)
        _, con_rank = con_idx.sort(dim=1)
        neg_mask = con_rank < torch.clamp(3 * pos_num, max=mask.size(1)).unsqueeze(-1)
        closs = (con * (mask + neg_mask).float()).sum(dim=1)
        return ((sl1 + closs) * (pos_num > 0).float() / pos_num.float().clamp(min=1e-6)).mean()


# --- NCF / NeuMF (DLE PyTorch/Recommendation/NCF/neumf.py @205058fd7c1941cd7d6a86a4eaf417bdc32730cb;
# ncf.py's defaults: --factors 64, --layers 256 256 128 64) ---
NCF_USERS, NCF_ITEMS = 138_493, 26_744  # MovieLens-20M's users and rated items (tables: per-step only)
NCF_FACTORS, NCF_LAYERS = 64, (256, 256, 128, 64)


class NeuMF(nn.Module):
    """GMF and MLP towers over user and item embeddings, one logit, BCE with logits; a sample is
    one user-item pair (the rows' rate)."""

    def __init__(self):
        super().__init__()
        self.mf_user, self.mf_item = nn.Embedding(NCF_USERS, NCF_FACTORS), nn.Embedding(NCF_ITEMS, NCF_FACTORS)
        half = NCF_LAYERS[0] // 2
        self.mlp_user, self.mlp_item = nn.Embedding(NCF_USERS, half), nn.Embedding(NCF_ITEMS, half)
        self.mlp = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(NCF_LAYERS))
        self.final = nn.Linear(NCF_LAYERS[-1] + NCF_FACTORS, 1)

    def loss(self, n: int) -> torch.Tensor:
        user, item = torch.randint(0, NCF_USERS, (n,)), torch.randint(0, NCF_ITEMS, (n,))
        xmf = self.mf_user(user) * self.mf_item(item)
        xmlp = torch.cat((self.mlp_user(user), self.mlp_item(item)), dim=1)
        for layer in self.mlp:
            xmlp = F.relu(layer(xmlp))
        logit = self.final(torch.cat((xmf, xmlp), dim=1))
        return F.binary_cross_entropy_with_logits(logit.squeeze(1), torch.rand(n))


# --- GNMT v2 (DLE PyTorch/Translation/GNMT seq2seq/models/{encoder,decoder,attention}.py
# @072523d5b21444a97b82876bf4c6d1d3e36ba255; train.py's defaults: --hidden-size 1024, --num-layers 4,
# shared embeddings, BPE vocabulary vocab.bpe.32000, --train-max-length 50) ---
GNMT_HIDDEN, GNMT_LAYERS, GNMT_VOCAB, GNMT_LENGTH = 1024, 4, 32_000, 50


class GNMT(nn.Module):
    """Encoder: a bidirectional LSTM, then LSTMs (residual from the third); decoder: an LSTM whose
    output attends (normalised Bahdanau) over the encoder, the rest fed its context, a classifier
    over the vocabulary. Counted at --train-max-length tokens each side: attention, the only term
    that grows with the length, is under 1% of the FLOPs there, so shorter sentences barely move it."""

    def __init__(self):
        super().__init__()
        h = GNMT_HIDDEN
        self.embed = nn.Embedding(GNMT_VOCAB, h)
        self.enc = nn.ModuleList([nn.LSTM(h, h, bidirectional=True), nn.LSTM(2 * h, h)]
                                 + [nn.LSTM(h, h) for _ in range(GNMT_LAYERS - 2)])
        self.att_rnn = nn.LSTM(h, h)
        self.linear_q, self.linear_k = nn.Linear(h, h, bias=False), nn.Linear(h, h, bias=False)
        self.att_v, self.norm_bias = nn.Parameter(torch.randn(h)), nn.Parameter(torch.zeros(h))
        self.norm_scalar = nn.Parameter(torch.ones(()))
        self.dec = nn.ModuleList(nn.LSTM(2 * h, h) for _ in range(GNMT_LAYERS - 1))
        self.classifier = nn.Linear(h, GNMT_VOCAB)

    def loss(self, n: int) -> torch.Tensor:
        src = self.embed(torch.randint(0, GNMT_VOCAB, (GNMT_LENGTH, n)))
        x, _ = self.enc[0](src)
        x, _ = self.enc[1](x)
        for rnn in self.enc[2:]:
            x = rnn(x)[0] + x
        y, _ = self.att_rnn(self.embed(torch.randint(0, GNMT_VOCAB, (GNMT_LENGTH, n))))
        # BahdanauAttention(normalize=True): v normalised, tanh(Wq q + Wk k + b), softmax over the source
        v = self.norm_scalar * self.att_v / self.att_v.norm()
        q, k = self.linear_q(y).transpose(0, 1), self.linear_k(x).transpose(0, 1)  # batch first
        scores = torch.tanh(q.unsqueeze(2) + k.unsqueeze(1) + self.norm_bias) @ v
        context = torch.bmm(F.softmax(scores, dim=-1), x.transpose(0, 1)).transpose(0, 1)
        z, _ = self.dec[0](torch.cat((y, context), dim=2))
        for rnn in self.dec[1:]:
            z = rnn(torch.cat((z, context), dim=2))[0] + z
        logits = self.classifier(z)
        return F.cross_entropy(logits.reshape(-1, GNMT_VOCAB), torch.randint(0, GNMT_VOCAB, (GNMT_LENGTH * n,)))


# --- Tacotron 2 (DLE PyTorch/SpeechSynthesis/Tacotron2/tacotron2/model.py @48dc9adacd401a3f414400bee061dc9e0fc86b3f;
# its arg_parser.py @550123fbbcf0beb7c49f38458fc40079c3cdc21f for every size below) ---
TACO = {"symbols": 148, "embed": 512, "enc_kernel": 5, "enc_convs": 3, "prenet": 256, "rnn": 1024, "att_dim": 128,
            "loc_filters": 32, "loc_kernel": 31, "post_dim": 512, "post_kernel": 5, "post_convs": 5, "mels": 80}
# One LJSpeech clip of the mean length (keithito.com/LJ-Speech-Dataset statistics: 1,308,674
# characters and 23:55:17 over 13,100 clips): 99.9 characters, 6.574 s; at DLE's train.py audio
# defaults (22,050 Hz, --hop-length 256) 86.13 frames/s, 566 mel frames. Derived: 1308674 / 13100
# and 86117 s / 13100 x 22050 / 256.
TACO_CHARS, TACO_FRAMES = 100, 566


class Tacotron2(nn.Module):
    """Encoder (embedding, 3 conv + BN, a bidirectional LSTM), prenet, location-sensitive
    attention, attention and decoder LSTM cells stepped once per mel frame (teacher forcing), a
    5-conv postnet, MSE + gate BCE. A cell runs as a one-step LSTM layer, the fused kernel it is on
    a GPU (cuDNN / _thnn_fused_lstm_cell): the gates' arithmetic inside it, not 15 elementwise ops."""

    def __init__(self, frames: int = TACO_FRAMES):
        super().__init__()
        t = TACO
        self.frames = frames
        self.embed = nn.Embedding(t["symbols"], t["embed"])
        self.enc_convs = nn.ModuleList(nn.Sequential(nn.Conv1d(t["embed"], t["embed"], t["enc_kernel"],
                                                               padding=t["enc_kernel"] // 2), nn.BatchNorm1d(t["embed"]))
                                       for _ in range(t["enc_convs"]))
        self.enc_lstm = nn.LSTM(t["embed"], t["embed"] // 2, batch_first=True, bidirectional=True)
        self.prenet = nn.ModuleList([nn.Linear(t["mels"], t["prenet"], bias=False),
                                     nn.Linear(t["prenet"], t["prenet"], bias=False)])
        self.att_rnn = nn.LSTM(t["prenet"] + t["embed"], t["rnn"])
        self.query = nn.Linear(t["rnn"], t["att_dim"], bias=False)
        self.memory = nn.Linear(t["embed"], t["att_dim"], bias=False)
        self.v = nn.Linear(t["att_dim"], 1, bias=False)
        self.loc_conv = nn.Conv1d(2, t["loc_filters"], t["loc_kernel"], padding=t["loc_kernel"] // 2, bias=False)
        self.loc_dense = nn.Linear(t["loc_filters"], t["att_dim"], bias=False)
        self.dec_rnn = nn.LSTM(t["rnn"] + t["embed"], t["rnn"])
        self.proj = nn.Linear(t["rnn"] + t["embed"], t["mels"])
        self.gate = nn.Linear(t["rnn"] + t["embed"], 1)
        dims = [t["mels"]] + [t["post_dim"]] * (t["post_convs"] - 1) + [t["mels"]]
        self.post = nn.ModuleList(nn.Sequential(nn.Conv1d(a, b, t["post_kernel"], padding=t["post_kernel"] // 2),
                                                nn.BatchNorm1d(b)) for a, b in itertools.pairwise(dims))

    def loss(self, n: int) -> torch.Tensor:
        t = TACO
        x = self.embed(torch.randint(0, t["symbols"], (n, TACO_CHARS))).transpose(1, 2)
        for conv in self.enc_convs:
            x = F.relu(conv(x))
        memory, _ = self.enc_lstm(x.transpose(1, 2))  # (n, chars, 512)
        target = torch.randn(n, t["mels"], self.frames)
        frames = torch.cat((torch.zeros(1, n, t["mels"]), target.permute(2, 0, 1)[:-1]), 0)
        prenet = F.relu(self.prenet[1](F.relu(self.prenet[0](frames))))
        processed = self.memory(memory)
        h_att = c_att = h_dec = c_dec = torch.zeros(1, n, t["rnn"])
        weights = cum = torch.zeros(n, TACO_CHARS)
        context = torch.zeros(n, t["embed"])
        outs = []
        for step in range(self.frames):
            _, (h_att, c_att) = self.att_rnn(torch.cat((prenet[step], context), -1).unsqueeze(0), (h_att, c_att))
            loc = self.loc_dense(self.loc_conv(torch.stack((weights, cum), 1)).transpose(1, 2))
            energies = self.v(torch.tanh(self.query(h_att[0]).unsqueeze(1) + loc + processed)).squeeze(-1)
            weights = F.softmax(energies, dim=1)
            cum = cum + weights
            context = torch.bmm(weights.unsqueeze(1), memory).squeeze(1)
            _, (h_dec, c_dec) = self.dec_rnn(torch.cat((h_att[0], context), -1).unsqueeze(0), (h_dec, c_dec))
            outs.append(torch.cat((h_dec[0], context), -1))
        out = torch.stack(outs, 2)  # (n, 1536, frames)
        mel = self.proj(out.transpose(1, 2)).transpose(1, 2)
        gate = self.gate(out.transpose(1, 2)).squeeze(-1)
        post = mel
        for i, conv in enumerate(self.post):
            post = conv(post)
            post = torch.tanh(post) if i < len(self.post) - 1 else post
        post = mel + post
        return F.mse_loss(mel, target) + F.mse_loss(post, target) + \
            F.binary_cross_entropy_with_logits(gate, torch.zeros_like(gate))


# --- WaveGlow (DLE PyTorch/SpeechSynthesis/Tacotron2/waveglow/model.py @3ed70df5e3f661a01e2436a4476bfb76aad17673;
# waveglow/arg_parser.py @7a8544e0a24df6c0fec06c044e5901de63b50ccd defaults; LAMBDA: --segment-length 8000) ---
GLOW = {"mels": 80, "flows": 12, "group": 8, "early_every": 4, "early_size": 2, "wn_layers": 8, "wn_channels": 512,
        "wn_kernel": 3}
GLOW_SEGMENT = 8000  # audio samples per clip (LAMBDA's --segment-length)
HOP = 256  # the upsampling stride (model.py's ConvTranspose1d(80, 80, 1024, stride=256))


class _WN(nn.Module):
    def __init__(self, n_in: int, n_cond: int):
        super().__init__()
        c, k = GLOW["wn_channels"], GLOW["wn_kernel"]
        self.start, self.end = nn.Conv1d(n_in, c, 1), nn.Conv1d(c, 2 * n_in, 1)
        self.ins = nn.ModuleList(nn.Conv1d(c, 2 * c, k, dilation=2 ** i, padding=(k * 2 ** i - 2 ** i) // 2)
                                 for i in range(GLOW["wn_layers"]))
        self.conds = nn.ModuleList(nn.Conv1d(n_cond, 2 * c, 1) for _ in range(GLOW["wn_layers"]))
        self.res = nn.ModuleList(nn.Conv1d(c, 2 * c if i < GLOW["wn_layers"] - 1 else c, 1)
                                 for i in range(GLOW["wn_layers"]))

    def forward(self, audio, spect):
        c = GLOW["wn_channels"]
        audio, output = self.start(audio), None
        for i, (a, b, r) in enumerate(zip(self.ins, self.conds, self.res)):
            act = a(audio) + b(spect)
            acts = r(torch.tanh(act[:, :c]) * torch.sigmoid(act[:, c:]))
            if i < len(self.ins) - 1:
                audio = acts[:, :c] + audio
                acts = acts[:, c:]
            output = acts if output is None else acts + output
        return self.end(output)


class WaveGlow(nn.Module):
    """12 flows of an invertible 1x1 convolution and an affine coupling whose WN has 8 dilated
    layers of 512 channels, conditioned on the upsampled mel spectrogram; 2 channels leave every
    4 flows; the flow's negative log-likelihood (sigma 1). A clip is a segment of 8000 samples."""

    def __init__(self):
        super().__init__()
        g = GLOW
        self.upsample = nn.ConvTranspose1d(g["mels"], g["mels"], 1024, stride=HOP)
        self.convinv, self.wn = nn.ModuleList(), nn.ModuleList()
        remaining = g["group"]
        for k in range(g["flows"]):
            if k % g["early_every"] == 0 and k > 0:
                remaining -= g["early_size"]
            self.convinv.append(nn.Conv1d(remaining, remaining, 1, bias=False))
            self.wn.append(_WN(remaining // 2, g["mels"] * g["group"]))

    def loss(self, n: int) -> torch.Tensor:
        g = GLOW
        spect = self.upsample(torch.randn(n, g["mels"], math.ceil(GLOW_SEGMENT / HOP)))[:, :, :GLOW_SEGMENT]
        spect = spect.unfold(2, g["group"], g["group"]).permute(0, 2, 1, 3).contiguous()
        spect = spect.view(n, spect.size(1), -1).permute(0, 2, 1)
        audio = torch.randn(n, GLOW_SEGMENT).unfold(1, g["group"], g["group"]).permute(0, 2, 1)
        out, log_s_total, log_det = [], 0.0, 0.0
        for k in range(g["flows"]):
            if k % g["early_every"] == 0 and k > 0:
                out.append(audio[:, :g["early_size"]])
                audio = audio[:, g["early_size"]:]
            audio = self.convinv[k](audio)
            log_det = log_det + torch.logdet(self.convinv[k].weight.squeeze(-1))
            half = audio.size(1) // 2
            a0, a1 = audio[:, :half], audio[:, half:]
            o = self.wn[k](a0, spect)
            log_s, b = o[:, half:], o[:, :half]
            audio = torch.cat([a0, torch.exp(log_s) * a1 + b], 1)
            log_s_total = log_s_total + log_s.sum()
        z = torch.cat(out + [audio], 1)
        return (z * z).sum() / 2 - log_s_total - log_det


# --- Transformer-XL (DLE PyTorch/LanguageModeling/Transformer-XL/pytorch/mem_transformer.py, relative
# partial-learnable attention; LAMBDA for every size: base 16 layers, d_model 512, 8 heads x 64, d_inner 2048,
# tgt_len = mem_len = 192; large 18 layers, 1024, 16 x 64, 4096, 256 / 256; neither passes --adaptive, so
# the softmax is the full tied one over WikiText-103's 267,735 words: n_token in the suite's own run log,
# lambdal/deeplearning-benchmark pytorch/results/1080Ti/PyTorch_transformerxlbase_FP16/03-03-2020_08-34-39.txt
# @e167f02cb45d83ccbc4b322dd33773e30ecfd100, 'adaptive=False ... n_token : 267735') ---
TXL_VOCAB = 267_735
TXL = {"transformer-xl-base": {"layers": 16, "d": 512, "heads": 8, "d_head": 64, "inner": 2048, "tgt": 192, "mem": 192},
       "transformer-xl-large": {"layers": 18, "d": 1024, "heads": 16, "d_head": 64, "inner": 4096, "tgt": 256, "mem": 256}}


class _RelLayer(nn.Module):
    """RelPartialLearnableDecoderLayer, post-LN: attention scores AC (content) + BD (relative
    position, rel-shifted), scaled, causally masked, softmax, over the memory and the segment;
    then the ReLU feed-forward. Unfused, as DLE's einsum code runs it."""

    def __init__(self, c: dict):
        super().__init__()
        hd = c["heads"] * c["d_head"]
        self.c = c
        self.qkv, self.r_net, self.o = (nn.Linear(c["d"], 3 * hd, bias=False), nn.Linear(c["d"], hd, bias=False),
                                        nn.Linear(hd, c["d"], bias=False))
        self.ln1, self.ln2 = nn.LayerNorm(c["d"]), nn.LayerNorm(c["d"])
        self.ff = nn.Sequential(nn.Linear(c["d"], c["inner"]), nn.ReLU(inplace=True), nn.Linear(c["inner"], c["d"]))

    def forward(self, w, r, mem, r_w_bias, r_r_bias, mask):
        c = self.c
        q_len, n = w.shape[:2]
        heads = self.qkv(torch.cat([mem, w], 0))
        k_len = heads.size(0)
        q, k, v = torch.chunk(heads, 3, dim=-1)
        q = q[-q_len:].view(q_len, n, c["heads"], c["d_head"])
        k, v = (t.view(k_len, n, c["heads"], c["d_head"]) for t in (k, v))
        rk = self.r_net(r).view(k_len, c["heads"], c["d_head"])
        ac = torch.einsum("ibnd,jbnd->bnij", q + r_w_bias, k)
        bd = torch.einsum("ibnd,jnd->bnij", q + r_r_bias, rk)
        pad = torch.zeros((*bd.shape[:3], 1), dtype=bd.dtype)  # _rel_shift
        bd = torch.cat([pad, bd], dim=3).view(*bd.shape[:2], bd.size(3) + 1, bd.size(2))[:, :, 1:].view_as(bd)
        score = ((ac + bd) * (1.0 / c["d_head"] ** 0.5)).masked_fill(mask, -65000.0)
        vec = torch.einsum("bnij,jbnd->ibnd", F.softmax(score, dim=3), v).reshape(q_len, n, -1)
        out = self.ln1(w + self.o(vec))
        return self.ln2(out + self.ff(out))


class TransformerXL(nn.Module):
    """MemTransformerLM on one training segment with a full memory (detached, as in training):
    scaled embedding, sinusoid positions over memory + segment, the layers, and the tied softmax."""

    def __init__(self, name: str):
        super().__init__()
        self.c = c = TXL[name]
        self.embed = nn.Embedding(TXL_VOCAB, c["d"])
        self.out_bias = nn.Parameter(torch.zeros(TXL_VOCAB))
        self.r_w_bias = nn.Parameter(torch.zeros(c["heads"], c["d_head"]))
        self.r_r_bias = nn.Parameter(torch.zeros(c["heads"], c["d_head"]))
        self.layers = nn.ModuleList(_RelLayer(c) for _ in range(c["layers"]))

    def loss(self, n: int) -> torch.Tensor:
        c = self.c
        q_len, k_len = c["tgt"], c["tgt"] + c["mem"]
        w = self.embed(torch.randint(0, TXL_VOCAB, (q_len, n))) * c["d"] ** 0.5
        pos = torch.arange(k_len - 1, -1, -1.0)
        inv = 1 / (10000 ** (torch.arange(0.0, c["d"], 2.0) / c["d"]))
        r = torch.cat([torch.sin(pos[:, None] * inv), torch.cos(pos[:, None] * inv)], -1)
        mask = torch.triu(torch.ones(q_len, k_len, dtype=torch.bool), diagonal=1 + c["mem"])
        for layer in self.layers:
            w = layer(w, r, torch.randn(c["mem"], n, c["d"]), self.r_w_bias, self.r_r_bias, mask)
        logits = F.linear(w.reshape(-1, c["d"]), self.embed.weight, self.out_bias)
        return F.cross_entropy(logits, torch.randint(0, TXL_VOCAB, (q_len * n,)))


# --- MPT decoders (mosaicml/llm-foundry scripts/train/yamls/pretrain/mpt-<size>.yaml: d_model, n_heads,
# n_layers, expansion_ratio 4, max_seq_len 2048, vocab_size 50368, for 125m and 350m @2a59782a6754ab8f446836003c86208fcbd69ef2,
# 760m and 30b @39393a21d451b7fc0fc342b0a2470d5ec59952f5, 1b @06560d59cb6e4788fe75d234748547334b88db2d,
# 3b @34c28fc9199278b10193e69fb52979043b7dc1bd, 7b @15fb4ffaa6fbe16a33e158118bd8ba0b77ba78dc,
# 13b @309f68378c1e5f83dd5ccefd9350196cb1553e43, 70b @17e6d6312c13710ecbbeeff7ec93ef8c9ecefe1e; the block is
# MPT's: pre-LN, fused QKV, flash/triton attention, GELU MLP, learned positions, the output tied to the
# token embedding, biases on (with them every size's parameter count equals the rows' NumParams, exactly) ---
MPT_VOCAB, MPT_SEQ = 50_368, 2048
MPT_SIZES = {"mpt-125m": (768, 12, 12), "mpt-350m": (1024, 16, 24), "mpt-760m": (1536, 12, 24), "mpt-1b": (2048, 16, 24),
       "mpt-3b": (2560, 20, 32), "mpt-7b": (4096, 32, 32), "mpt-13b": (5120, 40, 40), "mpt-30b": (7168, 56, 48),
       "mpt-70b": (8192, 64, 80)}  # name -> (d_model, n_heads, n_layers)


class _MPTBlock(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.wqkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        n, s, d = x.shape
        q, k, v = (t.view(n, s, self.heads, -1).transpose(1, 2) for t in self.wqkv(self.ln1(x)).chunk(3, dim=-1))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(n, s, d)
        x = x + self.out(a)
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class MPT(nn.Module):
    """One 2048-token sequence through an MPT decoder (no activation checkpointing: a recompute
    adds a forward's FLOPs and its bytes alike)."""

    def __init__(self, name: str):
        super().__init__()
        d, heads, layers = MPT_SIZES[name]
        self.wte, self.wpe = nn.Embedding(MPT_VOCAB, d), nn.Embedding(MPT_SEQ, d)
        self.blocks = nn.ModuleList(_MPTBlock(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)

    def loss(self, n: int) -> torch.Tensor:
        ids = torch.randint(0, MPT_VOCAB, (n, MPT_SEQ))
        x = self.wte(ids) + self.wpe(torch.arange(MPT_SEQ))
        for block in self.blocks:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)
        return F.cross_entropy(logits.reshape(-1, MPT_VOCAB), ids.reshape(-1))

"""A small transformer language model with its own data: the module's train_dataloader() yields
token ids (int64) of random text, and AdamW trains it. Probe it with

    advisor probe --workload examples.tinylm:TinyLM --init-args '{"d_model": 64, "layers": 2}'
"""

from __future__ import annotations

import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class RandomTokens(Dataset):
    """Sequences of token ids, made once from a seed: (input, next-token target) pairs."""

    def __init__(self, vocab_size: int, seq_len: int, n: int = 512, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        self.tokens = torch.randint(0, vocab_size, (n, seq_len + 1), generator=g)

    def __len__(self) -> int:
        return len(self.tokens)

    def __getitem__(self, i: int):
        t = self.tokens[i]
        return t[:-1], t[1:]


class TinyLM(pl.LightningModule):
    def __init__(self, vocab_size: int = 1000, d_model: int = 128, heads: int = 4, layers: int = 2,
                 seq_len: int = 64, batch_size: int = 16, lr: float = 3e-4):
        super().__init__()
        self.save_hyperparameters()  # batch_size among the hparams: Lightning's Tuner (and the probe) can change it
        self.embed = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Parameter(torch.zeros(1, seq_len, d_model))
        layer = nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, dropout=0.0, batch_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(d_model, vocab_size)
        self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(seq_len), persistent=False)

    def forward(self, ids):
        x = self.embed(ids) + self.pos[:, : ids.shape[1]]
        return self.head(self.blocks(x, mask=self.causal[: ids.shape[1], : ids.shape[1]], is_causal=True))

    def training_step(self, batch, batch_idx):
        ids, target = batch
        logits = self(ids)
        return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))

    def train_dataloader(self):
        ds = RandomTokens(self.hparams.vocab_size, self.hparams.seq_len)
        return DataLoader(ds, batch_size=self.hparams.batch_size, shuffle=True, drop_last=True)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.hparams.lr)

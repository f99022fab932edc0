"""A recommender with embedding tables: user and item ids (int64) looked up in nn.Embedding tables,
a user's recent items pooled by an nn.EmbeddingBag, an MLP over the three, trained on click labels
(float). Batches are dicts of tensors from the module's own train_dataloader().

With `sparse=True` (the default) the tables make sparse gradients, so they train with SparseAdam
and the MLP with Adam: two optimizers, stepped by hand (`automatic_optimization = False`), as
Lightning requires for more than one. `sparse=False` is one Adam over everything. Probe it with

    advisor probe --workload examples.recommender:Recommender --init-args '{"users": 100000}'
"""

from __future__ import annotations

import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Clicks(Dataset):
    """(user, item, recent items, clicked) rows, made once from a seed."""

    def __init__(self, users: int, items: int, history: int, n: int = 4096, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        self.user = torch.randint(0, users, (n,), generator=g)
        self.item = torch.randint(0, items, (n,), generator=g)
        self.history = torch.randint(0, items, (n, history), generator=g)
        self.label = torch.rand(n, generator=g).round()

    def __len__(self) -> int:
        return len(self.user)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"user": self.user[i], "item": self.item[i], "history": self.history[i], "label": self.label[i]}


class Recommender(pl.LightningModule):
    def __init__(self, users: int = 10_000, items: int = 5_000, dim: int = 32, history: int = 10,
                 hidden: int = 64, sparse: bool = True, batch_size: int = 256, lr: float = 1e-3):
        super().__init__()
        self.save_hyperparameters()  # batch_size among the hparams: the probe can search it
        self.user = nn.Embedding(users, dim, sparse=sparse)
        self.item = nn.Embedding(items, dim, sparse=sparse)
        self.recent = nn.EmbeddingBag(items, dim, mode="mean", sparse=sparse)
        self.mlp = nn.Sequential(nn.Linear(3 * dim, hidden), nn.ReLU(), nn.Linear(hidden, 1))
        self.automatic_optimization = not sparse  # two optimizers are stepped by hand

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        z = torch.cat([self.user(batch["user"]), self.item(batch["item"]), self.recent(batch["history"])], dim=-1)
        return self.mlp(z).squeeze(-1)

    def training_step(self, batch, batch_idx):
        loss = nn.functional.binary_cross_entropy_with_logits(self(batch), batch["label"])
        if self.automatic_optimization:
            return loss
        optimizers = self.optimizers()
        for opt in optimizers:
            opt.zero_grad()
        self.manual_backward(loss)
        for opt in optimizers:
            opt.step()
        return loss

    def train_dataloader(self):
        h = self.hparams
        return DataLoader(Clicks(h["users"], h["items"], h["history"]), batch_size=h["batch_size"],
                          shuffle=True, drop_last=True)

    def configure_optimizers(self):
        lr = self.hparams["lr"]
        if not self.hparams["sparse"]:
            return torch.optim.Adam(self.parameters(), lr=lr)
        tables = [*self.user.parameters(), *self.item.parameters(), *self.recent.parameters()]
        return [torch.optim.Adam(self.mlp.parameters(), lr=lr), torch.optim.SparseAdam(tables, lr=lr)]

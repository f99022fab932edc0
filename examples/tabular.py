"""A tabular MLP fed by a LightningDataModule whose batches are dicts of feature tensors. Probe it
with its LightningCLI config (examples/tabular.yaml):

    advisor probe --config examples/tabular.yaml
"""

from __future__ import annotations

import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class RandomTable(Dataset):
    """Rows of numeric features, a categorical column and a label, made once from a seed."""

    def __init__(self, rows: int, features: int, categories: int, classes: int, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        self.numeric = torch.randn(rows, features, generator=g)
        self.category = torch.randint(0, categories, (rows,), generator=g)
        self.label = torch.randint(0, classes, (rows,), generator=g)

    def __len__(self) -> int:
        return len(self.label)

    def __getitem__(self, i: int):
        return {"numeric": self.numeric[i], "category": self.category[i], "label": self.label[i]}


class TableData(pl.LightningDataModule):
    def __init__(self, rows: int = 4096, features: int = 32, categories: int = 50, classes: int = 4,
                 batch_size: int = 64, num_workers: int = 0):
        super().__init__()
        self.save_hyperparameters()
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.table: RandomTable | None = None

    def setup(self, stage: str | None = None) -> None:
        h = self.hparams
        self.table = RandomTable(h.rows, h.features, h.categories, h.classes)

    def train_dataloader(self):
        return DataLoader(self.table, batch_size=self.batch_size, shuffle=True, drop_last=True,
                          num_workers=self.num_workers, persistent_workers=self.num_workers > 0)


class TabularMLP(pl.LightningModule):
    def __init__(self, features: int = 32, categories: int = 50, embed_dim: int = 8, hidden: int = 128,
                 classes: int = 4, lr: float = 1e-3):
        super().__init__()
        self.save_hyperparameters()
        self.embed = nn.Embedding(categories, embed_dim)
        self.net = nn.Sequential(nn.Linear(features + embed_dim, hidden), nn.ReLU(),
                                 nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, classes))

    def forward(self, numeric, category):
        return self.net(torch.cat([numeric, self.embed(category)], dim=1))

    def training_step(self, batch, batch_idx):
        return nn.functional.cross_entropy(self(batch["numeric"], batch["category"]), batch["label"])

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)

"""A tiny GAN: an MLP generator and an MLP discriminator on 2-D points from a ring of Gaussians,
trained with manual optimization (two optimizers, `automatic_optimization = False`). Its steps are
a few small matmuls, so on a CPU each op is short and the threads meeting at every op's barrier
decide its speed: issue 33's case, where two threads beside one busy process trained 33x slower
than one (benchmarks/busy_probe.py). Probe it with

    advisor probe --workload examples.gan:TinyGAN --accelerator cpu
"""

from __future__ import annotations

import math

import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def ring(n: int, modes: int = 8, radius: float = 2.0, spread: float = 0.05, seed: int = 0) -> torch.Tensor:
    """n 2-D points around `modes` Gaussians on a circle (the usual toy target of a GAN)."""
    g = torch.Generator().manual_seed(seed)
    angle = torch.randint(0, modes, (n,), generator=g).float() * (2 * math.pi / modes)
    centre = torch.stack([angle.cos(), angle.sin()], dim=1) * radius
    return centre + spread * torch.randn(n, 2, generator=g)


def mlp(inputs: int, hidden: int, outputs: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(inputs, hidden), nn.LeakyReLU(0.2), nn.Linear(hidden, hidden),
                         nn.LeakyReLU(0.2), nn.Linear(hidden, outputs))


class TinyGAN(pl.LightningModule):
    def __init__(self, latent: int = 8, hidden: int = 64, batch_size: int = 64, lr: float = 2e-4, samples: int = 8192):
        super().__init__()
        self.save_hyperparameters()  # batch_size among the hparams: the probe can search it
        self.generator = mlp(latent, hidden, 2)
        self.discriminator = mlp(2, hidden, 1)
        self.automatic_optimization = False  # two optimizers, stepped by hand

    def training_step(self, batch, batch_idx):
        (real,) = batch
        opt_g, opt_d = self.optimizers()
        z = torch.randn(real.shape[0], self.hparams["latent"], device=real.device)
        fake = self.generator(z)
        bce = nn.functional.binary_cross_entropy_with_logits
        ones = torch.ones(real.shape[0], 1, device=real.device)
        zeros = torch.zeros_like(ones)
        d_loss = bce(self.discriminator(real), ones) + bce(self.discriminator(fake.detach()), zeros)
        opt_d.zero_grad()
        self.manual_backward(d_loss)
        opt_d.step()
        g_loss = bce(self.discriminator(fake), ones)
        opt_g.zero_grad()
        self.manual_backward(g_loss)
        opt_g.step()
        return g_loss

    def train_dataloader(self):
        h = self.hparams
        return DataLoader(TensorDataset(ring(h["samples"])), batch_size=h["batch_size"], shuffle=True, drop_last=True)

    def configure_optimizers(self):
        lr = self.hparams["lr"]
        return [torch.optim.Adam(self.generator.parameters(), lr=lr, betas=(0.5, 0.999)),
                torch.optim.Adam(self.discriminator.parameters(), lr=lr, betas=(0.5, 0.999))]

"""Synthetic image data for the probe.

Images are uint8 and made once from a seed: the loader then only indexes memory, and the
host-to-device copy moves a quarter of the bytes of float32 (article B); they become float and
are normalised on the device (see normalise()).
"""

from __future__ import annotations

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader, Dataset

# ImageNet channel statistics, scaled to uint8 pixel values.
MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)

POOL_IMAGES = 256  # distinct images held in memory; indices wrap around them
EPOCH_LENGTH = 1_000_000  # virtual length: a rung ends on the stopping rule, not on an epoch


class SyntheticImages(Dataset):
    def __init__(self, image_size: int, num_classes: int, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        self.images = torch.randint(0, 256, (POOL_IMAGES, 3, image_size, image_size), dtype=torch.uint8, generator=g)
        self.num_classes = num_classes

    def __len__(self) -> int:
        return EPOCH_LENGTH

    def __getitem__(self, i: int):
        # Labels follow the articles' toy: index % classes.
        return self.images[i % len(self.images)], i % self.num_classes


def worker_init(_worker_id: int) -> None:
    # Each worker would otherwise start as many intra-op threads as there are cores and fight
    # the training process for them (article C).
    torch.set_num_threads(1)


class SyntheticDataModule(pl.LightningDataModule):
    def __init__(self, image_size: int = 224, num_classes: int = 1000, batch_size: int = 128,
                 num_workers: int = 0, pin_memory: bool = False, seed: int = 0):
        super().__init__()
        self.image_size = image_size
        self.num_classes = num_classes
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.seed = seed
        self._ds: SyntheticImages | None = None
        self._loader: DataLoader | None = None  # kept: a rung that keeps this loader keeps its workers running

    def setup(self, stage: str | None = None) -> None:
        if self._ds is None:
            self._ds = SyntheticImages(self.image_size, self.num_classes, self.seed)

    def train_dataloader(self) -> DataLoader:
        self.setup()
        if self._loader is not None:
            return self._loader
        workers = self.num_workers
        self._loader = DataLoader(
            self._ds,
            batch_size=self.batch_size,
            shuffle=False,
            drop_last=True,
            num_workers=workers,
            pin_memory=self.pin_memory,
            persistent_workers=workers > 0,
            worker_init_fn=worker_init if workers > 0 else None,
        )
        return self._loader


_STATS: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}


def _stats(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    # Made once per device: torch.tensor(list, device="cuda") is a blocking copy, which would
    # stall every timed step until the GPU queue drains.
    if device not in _STATS:
        _STATS[device] = (torch.tensor(MEAN, device=device).view(1, 3, 1, 1),
                          torch.tensor(STD, device=device).view(1, 3, 1, 1))
    return _STATS[device]


def normalise(x: torch.Tensor, channels_last: bool = False) -> torch.Tensor:
    """uint8 NCHW images -> normalised float32 on whatever device x is on."""
    mean, std = _stats(x.device)
    x = (x.float() - mean) / std
    if channels_last and x.dim() == 4:
        x = x.contiguous(memory_format=torch.channels_last)
    return x

"""What a probe trains: the LightningModule and DataModule for one configuration."""

from __future__ import annotations

import lightning.pytorch as pl
import torch
from torch import nn

from ..contract.result import ProbeConfig, WorkloadSpec
from . import workloads
from .batches import set_batch_size
from .data import SyntheticDataModule, normalise

DEFAULT_LR = 0.01


class ProbeModule(pl.LightningModule):
    """A builtin network trained the articles' way: SGD, cross-entropy, images normalised on the device."""

    def __init__(self, net: nn.Module, channels_last: bool = False, ipex_dtype: torch.dtype | None = None):
        super().__init__()
        self.net = net
        self.loss_fn = nn.CrossEntropyLoss()
        self.channels_last = channels_last
        self.ipex_dtype = ipex_dtype

    def forward(self, x):
        return self.net(x)

    def on_after_batch_transfer(self, batch, dataloader_idx):
        x, y = batch
        return normalise(x, self.channels_last), y

    def training_step(self, batch, batch_idx):
        x, y = batch
        return self.loss_fn(self(x), y)

    def configure_optimizers(self):
        opt = torch.optim.SGD(self.parameters(), lr=DEFAULT_LR)
        if self.ipex_dtype is not None:
            import intel_extension_for_pytorch as ipex

            self.net, opt = ipex.optimize(self.net, optimizer=opt, dtype=self.ipex_dtype)
        return opt


def build_workload(spec: WorkloadSpec, config: ProbeConfig,
                   seed: int = 0) -> tuple[pl.LightningModule, pl.LightningDataModule | None]:
    """The module and its DataModule (None: the module's own train_dataloader() feeds it), the
    batch size set Lightning's way (batches.set_batch_size) as well as offered to the constructors."""
    if workloads.is_builtin(spec):
        ipex_dtype = None
        if config.ipex:
            ipex_dtype = torch.bfloat16 if config.precision == "bf16-mixed" else torch.float32
        module = ProbeModule(workloads.build_net(spec), channels_last=config.channels_last, ipex_dtype=ipex_dtype)
        dm = SyntheticDataModule(spec.image_size, spec.num_classes, config.batch_size,
                                 num_workers=config.num_workers, pin_memory=config.pin_memory, seed=seed)
    else:
        module = workloads.build_user_module(spec, config.batch_size)
        dm = None
        if spec.datamodule:
            dm = workloads.build_user_datamodule(spec, config.batch_size, config.num_workers, config.pin_memory)
        set_batch_size(module, dm, config.batch_size)
    if config.channels_last:
        module = module.to(memory_format=torch.channels_last)
    return module, dm


def compiled(module: pl.LightningModule, backend: str) -> pl.LightningModule:
    """torch.compile with inductor, or with AMD's zentorch backend (importing it registers it)."""
    if backend == "zentorch":
        import zentorch  # noqa: F401
    return torch.compile(module, backend=backend)


def xla_trainer_kwargs() -> dict:
    """Lightning's XLA accelerator counts TPU chips only, so on torch_xla's CPU device
    (PJRT_DEVICE=CPU) it says none are there: train there through one XLA device named directly."""
    import torch_xla.core.xla_model as xm
    from lightning.pytorch.accelerators import XLAAccelerator
    from lightning.pytorch.strategies import SingleDeviceXLAStrategy

    class XLACPUAccelerator(XLAAccelerator):
        @staticmethod
        def auto_device_count() -> int:
            return 1

        @staticmethod
        def is_available() -> bool:
            return True

    accelerator = XLACPUAccelerator()
    return {"accelerator": accelerator, "devices": 1,
            "strategy": SingleDeviceXLAStrategy(device=xm.xla_device(), accelerator=accelerator)}

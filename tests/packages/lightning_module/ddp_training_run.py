"""Two CPU ranks (gloo, DDPStrategy) training with ThroughputCallback, started the way a user starts
them: this script runs as rank 0 and Lightning's own launcher re-runs it as rank 1. Run by
test_training_run.py's DDP tests (not collected: no test_ prefix).

    python ddp_training_run.py OUT_DIR equal|uneven|fsdp

uneven: rank 1 trains batches of 12 to rank 0's 8, and sleeps 20 ms a step (a slower rank). fsdp:
the module shards itself with torch's fully_shard in configure_model(), on Lightning's
ModelParallelStrategy (data parallel over both ranks), as a user's FSDP2 run does. Each
rank writes OUT_DIR/rank<N>.json (what its callback did) and asks for its record at
OUT_DIR/run-rank<N>.json: only rank 0's may exist.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from pathlib import Path

import lightning.pytorch as pl
import torch
from lightning.pytorch.strategies import DDPStrategy, ModelParallelStrategy
from torch.utils.data import DataLoader, TensorDataset

from lightning_module import ThroughputCallback
from lightning_module.run import hardware

FEATURES, BATCH, UNEVEN_BATCH, SLOW_S = 8, 8, 12, 0.02


class Ranked(pl.LightningModule):
    def __init__(self, uneven: bool):
        super().__init__()
        self.uneven = uneven
        self.net = torch.nn.Sequential(torch.nn.Linear(FEATURES, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))

    def _slow(self) -> bool:
        return self.uneven and self.global_rank == 1

    def training_step(self, batch, batch_idx):
        if self._slow():
            time.sleep(SLOW_S)
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x).squeeze(-1), y)

    def train_dataloader(self):
        g = torch.Generator().manual_seed(0)
        data = TensorDataset(torch.randn(4096, FEATURES, generator=g), torch.randn(4096, generator=g))
        return DataLoader(data, batch_size=UNEVEN_BATCH if self._slow() else BATCH)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


class Sharded(Ranked):
    def configure_model(self):
        from torch.distributed.fsdp import fully_shard

        for layer in self.net:
            if any(True for _ in layer.parameters()):
                fully_shard(layer, mesh=self.device_mesh["data_parallel"])
        fully_shard(self, mesh=self.device_mesh["data_parallel"])


def main() -> None:
    out, mode = Path(sys.argv[1]), sys.argv[2]
    warnings.filterwarnings("ignore")
    hardware.ec2_instance_type = lambda timeout=0.5: None  # off EC2: no half-second metadata wait
    rank = int(os.environ.get("LOCAL_RANK", "0"))  # set by Lightning's launcher for the rank it starts
    cb = ThroughputCallback(output=out / f"run-rank{rank}.json", warmup_steps=2, time_pipeline=False,
                            workload="examples.tabular:TabularMLP")  # named by hand: the class is in a script
    strategy = (ModelParallelStrategy(data_parallel_size=2, tensor_parallel_size=1, process_group_backend="gloo")
                if mode == "fsdp" else DDPStrategy(process_group_backend="gloo"))
    trainer = pl.Trainer(accelerator="cpu", devices=2, strategy=strategy,
                         max_steps=24, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, callbacks=[cb])
    trainer.fit(Sharded(uneven=False) if mode == "fsdp" else Ranked(uneven=mode == "uneven"))
    (out / f"rank{rank}.json").write_text(json.dumps({
        "rank": trainer.global_rank, "world_size": trainer.world_size, "written": str(cb.written) if cb.written else None,
        "error": cb.error, "result_id": cb.result.result_id if cb.result else None}))


if __name__ == "__main__":
    main()

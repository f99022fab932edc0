"""The probe: it trains the user's workload with PyTorch Lightning and measures samples/s.

Two halves: contract/ is torch-free (the result schema, options, workload facts and the rules the
probe decides by) and is what the advisor imports; run/ is the torch side that applies them.

`from lightning_module import ThroughputCallback` gives the callback for your own Trainer
(run/training_run.py); it is imported on first use, so importing the contract stays torch-free.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ThroughputCallback", "TrainingRunError"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from .run import training_run

        return getattr(training_run, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

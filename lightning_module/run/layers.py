"""A model's repeated layers: what is counted per layer (activations.py), extrapolated per layer
(shallow.py) and sharded one unit at a time (ranks.py's FSDP)."""

from __future__ import annotations

from torch import nn


def find_layers(module: nn.Module) -> list[nn.Module]:
    """The repeated blocks: the longest ModuleList / Sequential of two or more children of one class."""
    best: list[nn.Module] = []
    for m in module.modules():
        if isinstance(m, (nn.ModuleList, nn.Sequential)):
            kids = list(m.children())
            if len(kids) >= 2 and len({type(k) for k in kids}) == 1 and len(kids) > len(best):
                best = kids
    return best

"""The probe's contract half (lightning_module/contract/) imports without torch, lightning or
torchvision: the advisor's fast path reads it, and a core install (no `probe` extra) has none."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from lightning_module import contract

BLOCKED = ("torch", "lightning", "torchvision")
# A None entry in sys.modules makes `import torch` (and `import torch.x`) raise ImportError.
CHECK = """
import importlib, sys
for name in {blocked!r}:
    sys.modules[name] = None
for mod in {modules!r}:
    importlib.import_module(mod)
print(sorted(m for m in sys.modules if m.startswith("lightning_module.run")))
"""


def contract_modules() -> list[str]:
    folder = Path(contract.__file__).parent
    return [f"lightning_module.contract.{p.stem}" for p in sorted(folder.glob("*.py")) if p.stem != "__init__"]


def test_every_contract_module_imports_without_torch():
    modules = contract_modules()
    assert "lightning_module.contract.ladder" in modules and len(modules) >= 7
    root = Path(contract.__file__).parents[2]
    out = subprocess.run([sys.executable, "-c", CHECK.format(blocked=BLOCKED, modules=modules)],
                         capture_output=True, text=True, cwd=root, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"  # nor does it reach into the torch half

"""Measure the facts `advisor recommend` needs about each builtin workload, without torch at
recommend time: parameter count, training FLOPs per sample (forward + backward) and the
activation memory saved for backward, at the default 224x224 input and 1000 classes.

FLOPs come from torch.utils.flop_counter.FlopCounterMode (it counts matmul/conv FLOPs as
2 x MACs and ignores elementwise ops, the usual convention). Activation bytes are the distinct
tensors autograd saves for backward (saved_tensors_hooks), fp32, per sample.

Run:  .venv/bin/python scripts/measure_workload_facts.py > lightning_module/contract/workload_facts.json
      (then paste the printed table into lightning_module/contract/workload_facts.py)
"""

from __future__ import annotations

import json
import sys

import torch
import torchvision

from lightning_module.contract.result import BUILTIN_MODELS, WorkloadSpec
from lightning_module.run.peaks import flop_counter
from lightning_module.run.workloads import build_net

IMAGE_SIZE = 224
NUM_CLASSES = 1000
BATCH = 2  # BatchNorm in training mode needs more than one sample


def measure(name: str) -> dict:
    if name not in BUILTIN_MODELS:
        raise SystemExit(f"unknown model {name}: use {', '.join(BUILTIN_MODELS)}")
    torch.manual_seed(0)
    # The probe's own builder, so the facts describe exactly the network the probe trains.
    model = build_net(WorkloadSpec(model=name, image_size=IMAGE_SIZE, num_classes=NUM_CLASSES)).train()
    x = torch.randn(BATCH, 3, IMAGE_SIZE, IMAGE_SIZE)
    y = torch.randint(0, NUM_CLASSES, (BATCH,))
    loss_fn = torch.nn.CrossEntropyLoss()

    with flop_counter() as fwd_counter:
        out = model(x)
    fwd = fwd_counter.get_total_flops() / BATCH

    model.zero_grad(set_to_none=True)
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor):
        # Parameters saved for backward are weights, counted separately; shared storage once.
        if not isinstance(t, torch.nn.Parameter):
            st = t.untyped_storage()
            seen[st.data_ptr()] = st.nbytes()
        return t

    with flop_counter() as train_counter:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = loss_fn(model(x), y)
        loss.backward()
    train = train_counter.get_total_flops() / BATCH
    params = sum(p.numel() for p in model.parameters())
    del out
    return {
        "params": params,
        "forward_flops_per_sample": fwd,
        "train_flops_per_sample": train,
        "activation_bytes_per_sample": sum(seen.values()) / BATCH,
    }


def main() -> None:
    names = sys.argv[1:] or list(BUILTIN_MODELS)
    facts = {}
    for name in names:
        facts[name] = measure(name)
        print(f"{name}: {facts[name]}", file=sys.stderr)
    json.dump(
        {"torch": torch.__version__, "torchvision": torchvision.__version__,
         "image_size": IMAGE_SIZE, "num_classes": NUM_CLASSES, "facts": facts},
        sys.stdout, indent=2,
    )
    print()


if __name__ == "__main__":
    main()

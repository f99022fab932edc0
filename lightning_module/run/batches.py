"""A user's batches, whatever their structure, and their batch size, Lightning's way.

Samples per step are counted from the batch itself: the leading dimension of its first tensor
(depth first: a tensor; a tuple, list or dict's items in order; a dataclass's fields), unless the
LightningModule or the DataModule defines the one hook

    def samples_in_batch(self, batch) -> int

(the module's wins), for batches whose samples are not their first tensor's rows (packed
sequences, a graph batch, tokens counted as samples).

Tokens, for sequence workloads, are counted the same way: a batch whose first tensor holds integer
ids in two dimensions, [batch, sequence], holds batch x sequence tokens (padding included); any
other batch holds none (images, features), unless the module or the DataModule defines

    def tokens_in_batch(self, batch) -> int

(the module's wins): the tokens it trains on, for packed or padded batches (count the attention
mask's ones) or ids in another layout.

The batch size is found and set as Lightning's Tuner.scale_batch_size does (its
lightning_hasattr / lightning_setattr): the `batch_size` attribute of the module, its hparams, the
DataModule, its hparams; every holder is set.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import torch

SAMPLES_HOOK = "samples_in_batch"
TOKENS_HOOK = "tokens_in_batch"
MAX_DEPTH = 32  # a batch nested deeper is not a batch


def first_tensor(batch: Any, depth: int = 0) -> torch.Tensor | None:
    if isinstance(batch, torch.Tensor):
        return batch
    if depth >= MAX_DEPTH or isinstance(batch, (str, bytes)):
        return None
    if isinstance(batch, (tuple, list)):  # before Mapping: an ABC check costs microseconds a step
        items = batch
    elif isinstance(batch, Mapping):
        items = batch.values()
    elif dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        items = (getattr(batch, f.name) for f in dataclasses.fields(batch))
    else:
        return None
    for item in items:
        if (t := first_tensor(item, depth + 1)) is not None:
            return t
    return None


def describe(batch: Any) -> str:
    """A batch's type in a few words, for an error line."""
    if isinstance(batch, Mapping):
        return f"a {type(batch).__name__} of {', '.join(sorted({type(v).__name__ for v in batch.values()})) or 'nothing'}"
    if isinstance(batch, (tuple, list)):
        return f"a {type(batch).__name__} of {', '.join(sorted({type(v).__name__ for v in batch})) or 'nothing'}"
    return f"a {type(batch).__name__}"


def leading_dim(batch: Any) -> int | None:
    t = first_tensor(batch)
    if t is None:
        return None
    shape = t.shape  # one call into torch: a training run counts every step's batch
    return shape[0] if shape else None


def samples_counter(module, datamodule=None) -> tuple[Callable[[Any], int | None], str]:
    """How to count a batch's samples, and by what ("hook" or "batch")."""
    for owner in (module, datamodule):
        hook = getattr(owner, SAMPLES_HOOK, None) if owner is not None else None
        if callable(hook):
            return hook, "hook"
    return leading_dim, "batch"


def sequence_tokens(batch: Any) -> int | None:
    """batch x sequence of a batch whose first tensor is [batch, sequence] integer ids; None for
    any other (a float or boolean tensor is features, pixels or a mask, not token ids)."""
    t = first_tensor(batch)
    if t is None or t.dim() != 2 or t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        return None
    return t.shape[0] * t.shape[1]


def tokens_counter(module, datamodule=None) -> tuple[Callable[[Any], int | None], str]:
    """How to count a batch's tokens, and by what ("hook" or "batch"); the count is None for a
    batch that holds no tokens."""
    for owner in (module, datamodule):
        hook = getattr(owner, TOKENS_HOOK, None) if owner is not None else None
        if callable(hook):
            return hook, "hook"
    return sequence_tokens, "batch"


def tokens_per_sample(batch: Any, samples: int, module, datamodule=None) -> tuple[float | None, str | None]:
    """The batch's tokens per sample and how they were counted ("hook" or "batch"); (None, None)
    when the batch holds no tokens. ValueError (one line) when tokens_in_batch() fails or returns
    what cannot be a count."""
    count, by = tokens_counter(module, datamodule)
    try:
        n = count(batch)
    except Exception as e:  # noqa: BLE001 - the user's hook: said in one line by the caller
        raise ValueError(f"{TOKENS_HOOK}() failed: {type(e).__name__}: {e}".splitlines()[0]) from None
    if n is None and by == "batch":
        return None, None
    if isinstance(n, torch.Tensor) and n.numel() == 1:
        n = int(n.item())
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"{TOKENS_HOOK}() returned {n!r}: a batch's tokens are a whole number of at least 1")
    return n / samples, by


def batch_holders(module, datamodule=None) -> list:
    """Where Lightning's Tuner finds `batch_size`: module, its hparams, DataModule, its hparams."""
    out: list = []
    for owner in (module, datamodule):
        if owner is None:
            continue
        if hasattr(owner, "batch_size"):
            out.append(owner)
        hp = getattr(owner, "hparams", None)
        if hp is not None and "batch_size" in hp:
            out.append(hp)
    return out


def read_batch_size(module, datamodule=None) -> int | None:
    for h in batch_holders(module, datamodule):
        v = h["batch_size"] if isinstance(h, Mapping) else getattr(h, "batch_size", None)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return None


def set_batch_size(module, datamodule, batch_size: int) -> bool:
    """Set it on every holder, as lightning_setattr; False when there is none."""
    holders = batch_holders(module, datamodule)
    for h in holders:
        if isinstance(h, Mapping):
            h["batch_size"] = batch_size
        else:
            h.batch_size = batch_size
    return bool(holders)

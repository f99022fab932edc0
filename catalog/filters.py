"""Which instance types a user asked for: one rule for `catalog show` and `recommend`.

An accelerator filter matches the device names the catalog itself carries: the model an
instance type lists (the accelerator table's key, or AWS's own name for a device the table does
not know, such as B300 or Trainium2), and for a known device its full name and vendor
("NVIDIA A100 40GB SXM4", "NVIDIA A100-40GB"). A query matches when its words, in order and
side by side, are whole words of one of those names, case-insensitively: "a100" is every A100,
"NVIDIA A100 80GB" one of them, "L4" never the L40S, "A10" never the A10G. Brand words the
names may lack ("Tesla T4") are not needed; AWS's names for a known device ("T4g") find it
through the accelerator table. A kind (gpu, neuron, gaudi, none or cpu) matches by kind.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import get_args

from .accelerators import lookup, specs
from .models import Arch, Catalog, InstanceType

KINDS = {"gpu": "gpu", "neuron": "neuron", "gaudi": "gaudi", "none": "none", "cpu": "none"}
ARCHS = get_args(Arch)
# Words that name a maker or a product line rather than a device.
_BRANDS = frozenset({"NVIDIA", "TESLA", "AWS", "AMAZON", "HABANA", "INTEL"})
_WORD = re.compile(r"[A-Z0-9]+")


class FilterError(ValueError):
    """A filter that names nothing in the catalog; the message says what it does have."""


def _words(name: str) -> tuple[str, ...]:
    return tuple(_WORD.findall(name.upper()))


@lru_cache(maxsize=4096)
def device_names(model: str) -> tuple[tuple[str, ...], ...]:
    """The names a catalog's accelerator model is known by, as word tuples."""
    names = [model]
    spec = specs().get(model)
    if spec is not None:
        names += [spec.name, f"{spec.vendor} {spec.key}"]
    return tuple(_words(n) for n in names)


def _contains(seq: tuple[str, ...], part: tuple[str, ...]) -> bool:
    n = len(part)
    return any(seq[i:i + n] == part for i in range(len(seq) - n + 1))


@lru_cache(maxsize=1024)
def _query(query: str) -> tuple[str | None, tuple[str, ...], str | None]:
    """(kind, the words that must match, the accelerator table's key for it if any)."""
    q = query.strip()
    if q.lower() in KINDS:
        return KINDS[q.lower()], (), None
    words = _words(q)
    core = tuple(w for w in words if w not in _BRANDS) or words  # "NVIDIA" alone: the vendor
    spec = lookup(q)
    return None, core, spec.key if spec is not None else None


def accelerator_matches(query: str, it: InstanceType) -> bool:
    kind, core, key = _query(query)
    if kind is not None:
        return it.accelerator_kind == kind
    if not it.accelerator_model or not core:
        return False
    if key is not None and it.accelerator_model == key:
        return True
    return any(_contains(name, core) for name in device_names(it.accelerator_model))


@dataclass(frozen=True)
class TypeFilter:
    """The instance-type filters both commands take; empty means no filter."""

    families: tuple[str, ...] = ()
    accelerators: tuple[str, ...] = ()  # any of them
    arch: str | None = None
    min_gpus: int = 0  # accelerator devices of any kind per instance

    def __call__(self, it: InstanceType) -> bool:
        return ((not self.families or it.family in self.families)
                and (not self.accelerators or any(accelerator_matches(q, it) for q in self.accelerators))
                and (self.arch is None or it.arch == self.arch)
                and it.accelerator_count >= self.min_gpus)

    def check(self, catalog: Catalog, regions: Iterable[str] = ()) -> None:
        """FilterError for a region, family or accelerator this catalog does not have."""
        for r in regions:
            if r not in catalog.offers:
                raise FilterError(f"unknown region {r!r}: this catalog has {', '.join(sorted(catalog.offers))}")
        types = catalog.instance_types.values()
        known = {it.family for it in types}
        for f in self.families:
            if f not in known:
                raise FilterError(f"unknown instance family {f!r} in this catalog "
                                  f"(it has {_sample(sorted(known, key=_family_order))})")
        for q in self.accelerators:
            if not any(accelerator_matches(q, it) for it in types):
                models = sorted({it.accelerator_model for it in types if it.accelerator_model})
                raise FilterError(f"no instance type in this catalog has accelerator {q!r}: it has "
                                  f"{', '.join(models)}; or give a kind: gpu, neuron, gaudi, none")
        if self.arch is not None and self.arch not in ARCHS:
            raise FilterError(f"unknown architecture {self.arch!r}: x86_64 or arm64")


def _family_order(f: str) -> tuple[str, int, str]:
    m = re.match(r"([a-z]+)(\d*)(.*)", f)
    return (m.group(1), int(m.group(2) or 0), m.group(3)) if m else (f, 0, "")


def _sample(names: list[str], n: int = 12) -> str:
    return ", ".join(names[:n]) + (f", ... ({len(names) - n} more)" if len(names) > n else "")

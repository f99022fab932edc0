"""EC2's running-vCPU quotas: which quota an instance type counts against, per market.

On-demand and spot instances are limited per region by vCPU quotas, one per instance class.
The classes and the families in each are AWS's:
  on-demand: https://docs.aws.amazon.com/ec2/latest/instancetypes/ec2-instance-quotas.html
    ("Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances", "... F instances",
    "... G and VT instances", "... Inf instances", "... P instances", "... Trn instances",
    "... DL instances", "... X instances", "... High Memory instances", "... HPC instances")
  spot: https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/using-spot-limits.html
    ("All DL / F / G and VT / Inf / P / Standard (A, C, D, H, I, M, R, T, Z) / Trn / X Spot
    Instance Requests"; High Memory and HPC types cannot run as spot).
The quota codes are the Service Quotas identifiers of those quotas (as the console's URLs
.../servicequotas/home/services/ec2/quotas/L-... and `aws service-quotas list-service-quotas
--service-code ec2` show them). A code is only a key: quotas are matched by code, else by their
documented name, so a renamed or re-coded quota is still found in the listing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Quota:
    code: str
    name: str

    def console_url(self, region: str) -> str:
        return f"https://{region}.console.aws.amazon.com/servicequotas/home/services/ec2/quotas/{self.code}"

    def how_to_raise(self, region: str, vcpus: int) -> str:
        return (f"request an increase at {self.console_url(region)} or with 'aws service-quotas "
                f"request-service-quota-increase --service-code ec2 --quota-code {self.code} "
                f"--desired-value {vcpus} --region {region}'")


@dataclass(frozen=True)
class QuotaClass:
    key: str  # "P", "G and VT", "Standard", ...
    prefixes: tuple[str, ...]  # a family's whole leading letters, else its first letter
    on_demand: Quota
    spot: Quota | None  # None: the class cannot run as spot

    def quota(self, market: str) -> Quota | None:
        return self.spot if market == "spot" else self.on_demand


CLASSES: tuple[QuotaClass, ...] = (
    QuotaClass("Standard", ("a", "c", "d", "h", "i", "m", "r", "t", "z"),
               Quota("L-1216C47A", "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances"),
               Quota("L-34B43A08", "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests")),
    QuotaClass("F", ("f",), Quota("L-74FC7D96", "Running On-Demand F instances"),
               Quota("L-88CF9481", "All F Spot Instance Requests")),
    QuotaClass("G and VT", ("g", "vt"), Quota("L-DB2E81BA", "Running On-Demand G and VT instances"),
               Quota("L-3819A6DF", "All G and VT Spot Instance Requests")),
    QuotaClass("Inf", ("inf",), Quota("L-1945791B", "Running On-Demand Inf instances"),
               Quota("L-B5D1601B", "All Inf Spot Instance Requests")),
    QuotaClass("P", ("p",), Quota("L-417A185B", "Running On-Demand P instances"),
               Quota("L-7212CCBC", "All P Spot Instance Requests")),
    QuotaClass("Trn", ("trn",), Quota("L-2C3B7624", "Running On-Demand Trn instances"),
               Quota("L-6B0D517C", "All Trn Spot Instance Requests")),
    QuotaClass("DL", ("dl",), Quota("L-6E869C2A", "Running On-Demand DL instances"),
               Quota("L-85EED4F7", "All DL Spot Instance Requests")),
    QuotaClass("X", ("x",), Quota("L-7295265B", "Running On-Demand X instances"),
               Quota("L-E3A00192", "All X Spot Instance Requests")),
    QuotaClass("High Memory", ("u",), Quota("L-43DA4232", "Running On-Demand High Memory instances"), None),
    QuotaClass("HPC", ("hpc",), Quota("L-F7808C92", "Running On-Demand HPC instances"), None),
)

_LETTERS = re.compile(r"[a-z]+")
_BY_PREFIX = {p: qc for qc in CLASSES for p in qc.prefixes}


def quota_class(instance_type: str) -> QuotaClass | None:
    """The class whose quota `instance_type` counts against; None for types outside every class
    (mac hosts run on Dedicated Hosts only). A family's leading letters name its class ("dl1" DL,
    "inf2" Inf, "trn2" Trn, "vt1" G and VT, "hpc7g" HPC); otherwise its first letter does ("d3",
    "im4gn", "t3" Standard; "gr6" G and VT; "p5en" P; "u7i-12tb" High Memory)."""
    family = instance_type.split(".", 1)[0].lower()
    m = _LETTERS.match(family)
    if not m or family.startswith("mac"):
        return None
    letters = m.group()
    return _BY_PREFIX.get(letters) or _BY_PREFIX.get(letters[0])


def _norm(name: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9 ]", " ", name.lower()).split())


def find(listing: dict[str, tuple[str, float]], quota: Quota) -> tuple[str, float] | None:
    """(code, vCPUs) of `quota` in a ListServiceQuotas result {code: (name, value)}: by code,
    else by its documented name."""
    if quota.code in listing:
        return quota.code, listing[quota.code][1]
    want = _norm(quota.name)
    for code, (name, value) in listing.items():
        if _norm(name) == want:
            return code, value
    return None

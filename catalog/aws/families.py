"""Hardware facts AWS publishes per instance family that DescribeInstanceTypes does not carry: the
link between an instance's devices, each device's link to the host, and the vCPUs of one CPU
socket. The fetchers (describe.py, scripts/build_snapshot.py) write them into InstanceType's fields
through facts(); the estimator reads only those fields.

Every figure here carries its source in the comment above it.
"""

from __future__ import annotations

# Per-device one-direction interconnect bandwidth inside an instance, GB/s. NVLink: NVIDIA
# datasheets give the bidirectional total per GPU (V100 300, A100 600, H100/H200 900, B200 1800
# GB/s); a ring all-reduce sends and receives at once, so one direction is half. PCIe (PCI-SIG):
# Gen3 x16 ~15.75 GB/s, Gen4 x16 ~31.5 GB/s per direction; GPUs talk through the host bridge.
NVLINK2 = ("NVLink 2 (V100 SXM2 datasheet: 300 GB/s bidirectional)", 150.0)
NVLINK3 = ("NVLink 3 (A100 datasheet: 600 GB/s bidirectional)", 300.0)
NVLINK4_H200 = ("NVLink 4 (H200 SXM datasheet: 900 GB/s bidirectional)", 450.0)
PCIE3 = ("PCIe Gen3 x16 (PCI-SIG: ~15.75 GB/s per direction)", 15.75)
PCIE4 = ("PCIe Gen4 x16 (PCI-SIG: ~31.5 GB/s per direction)", 31.5)
INTERCONNECT: dict[str, tuple[str, float]] = {
    "p3": NVLINK2,
    "p3dn": NVLINK2,
    "p4d": NVLINK3,
    "p4de": NVLINK3,
    "p5": ("NVLink 4 (H100 SXM datasheet: 900 GB/s bidirectional)", 450.0),
    "p5e": NVLINK4_H200,
    "p5en": NVLINK4_H200,
    "p6-b200": ("NVLink 5 (HGX B200: 1.8 TB/s bidirectional)", 900.0),
    "g4dn": PCIE3,
}

# Each GPU's host link, which every input sample crosses (the probe feeds uint8 images and
# normalises on the device). Scaling another workload's utilisation by FLOPs alone put a tiny MLP
# at 578k samples/s on one A10G, 87 GB/s of 224 px images; this link bounds it. Gen3 x16: T4 and
# V100 datasheets; Gen4 x16: A10G/L4/L40S/A100 datasheets, and p5/p5e, whose hosts (3rd-gen EPYC)
# are Gen4; Gen5 x16 (~63 GB/s): AWS's p5en launch ("PCIe Gen5 between CPU and GPU") and p6-b200.
PCIE5 = ("PCIe Gen5 x16 (PCI-SIG: ~63 GB/s per direction)", 63.0)
HOST_LINK: dict[str, tuple[str, float]] = {
    "g4dn": PCIE3, "g5g": PCIE3, "p3": PCIE3, "p3dn": PCIE3,
    "p5en": PCIE5, "p6-b200": PCIE5,
}

# vCPUs of one CPU socket, per family. Article A found data-parallel training across the two
# NUMA nodes (sockets) of a c6i.32xlarge no faster than one, so a CPU estimate counts one socket
# only (the band's high end still allows linear scaling). Socket sizes: Article A (c6i.32xlarge
# = 2 NUMA nodes of 64 vCPUs); the largest sizes of the other families are two sockets of the
# processor AWS names on the family page (Xeon 8488C 48 cores x 2 threads; EPYC 9R14 96 cores,
# one thread per vCPU; Graviton4 96 cores); Graviton3 is one 64-core socket.
SOCKET_VCPUS: dict[str, int] = {
    "c6i": 64, "m6i": 64, "r6i": 64,
    "c7i": 96, "m7i": 96, "r7i": 96,
    "c7a": 96, "m7a": 96, "r7a": 96,
    "c7g": 64, "m7g": 64, "r7g": 64,
    "c8g": 96, "m8g": 96, "r8g": 96,
}


def facts(family: str, accelerator_kind: str, accelerator_count: int) -> dict:
    """InstanceType's hardware-fact fields for a type of this family: a host link for every
    accelerator (PCIe Gen4 where the family is not listed), an interconnect only between two or
    more devices, a socket size where the family's is known (else None: all vCPUs count)."""
    link = HOST_LINK.get(family, PCIE4) if accelerator_kind != "none" else (None, None)
    ic = INTERCONNECT.get(family, PCIE4) if accelerator_kind != "none" and accelerator_count > 1 else (None, None)
    return {"socket_vcpus": SOCKET_VCPUS.get(family), "interconnect": ic[0], "interconnect_gbs": ic[1],
            "host_link": link[0], "host_link_gbs": link[1]}

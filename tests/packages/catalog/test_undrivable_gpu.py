"""A GPU the probe's stack cannot drive is excluded with the reason, as Neuron and Gaudi are: PyTorch
publishes aarch64 CUDA wheels only for compute capability 8.0 and up, so the T4G behind g5g's
Graviton (Turing, sm_75) gets no estimate; the same T4 behind an x86 host (g4dn) does."""

from __future__ import annotations

import json

from advisor.paths import load_catalog
from catalog.hardware import ARM64_CUDA_SOURCE, undrivable_gpu


def test_an_arm64_turing_is_undrivable_and_says_why_with_its_source():
    cat = load_catalog()
    g5g = [it for it in cat.instance_types.values() if it.name.startswith("g5g.")]
    assert g5g, "the shipped catalog has g5g"
    for it in g5g:
        why = undrivable_gpu(it)
        assert why is not None and "Turing" in why and ARM64_CUDA_SOURCE in why
    assert ARM64_CUDA_SOURCE.startswith("https://github.com/pytorch/pytorch/blob/")
    # x86 hosts, and arm64 hosts of an architecture the aarch64 wheels carry, are drivable
    for it in cat.instance_types.values():
        if it.accelerator_kind != "none" and (it.arch == "x86_64" or not it.name.startswith("g5g.")):
            assert undrivable_gpu(it) is None, it.name


def test_recommend_excludes_g5g_with_the_reason(cli):
    code, out, err = cli("recommend", "--samples", "1e8", "--deadline", "3d", "--budget", "500", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    ranked = {r["instance_type"] for r in doc["recommendations"] + doc["probe_next"]}
    assert not any(n.startswith("g5g.") for n in ranked)
    excluded = {e["instance_type"]: e["reason"] for e in doc["excluded"]}
    assert "no aarch64 CUDA build" in excluded["g5g.xlarge"]
    assert "g4dn.xlarge" not in excluded  # the same T4 silicon behind a Xeon

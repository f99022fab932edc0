"""A model bigger than the probing machine: its parameters counted on the meta device, two
shallower copies measured and extrapolated to its depth, against whole runs of small models."""

from __future__ import annotations

import pytest
from factories import fake_measurement

from lightning_module.contract.extrapolate import (
    DepthError,
    activation_terms,
    at_depth,
    check_full_depth,
    parse_depths,
    widen,
)
from lightning_module.contract.options import ProbeOptions
from lightning_module.contract.result import WorkloadSpec
from lightning_module.run import probe
from lightning_module.run.shallow import count_on_meta
from lightning_module.run.workloads import WorkloadError

HUGE = """
    import lightning.pytorch as pl
    from torch import nn

    class Huge(pl.LightningModule):
        # 24 layers of 65536 x 65536: 103 billion parameters, 412 GB in fp32
        def __init__(self, width: int = 65536, n_layer: int = 24):
            super().__init__()
            self.layers = nn.ModuleList(nn.Linear(width, width, bias=False) for _ in range(n_layer))
"""


def test_a_module_too_big_to_allocate_is_counted_on_meta(user_module):
    user_module("hugemodel", HUGE)
    params, trainable, stored = count_on_meta(WorkloadSpec(model="hugemodel:Huge"))
    assert params == trainable == 24 * 65536**2
    assert stored == 4 * params


def test_depths_are_parsed_and_checked_against_the_full_depth():
    assert parse_depths("2,4") == (2, 4)
    assert parse_depths("1,2,3") == (1, 2, 3)
    for bad in ("4,2", "2", "0,2", "a,b", "2,2,3", "1,3,2", ",".join(map(str, range(1, 11)))):
        with pytest.raises(DepthError):
            parse_depths(bad)
    assert check_full_depth(32, "n_layer", (2, 4)) == 32
    with pytest.raises(DepthError, match="measure it whole"):
        check_full_depth(4, "n_layer", (2, 4))
    with pytest.raises(DepthError, match="measure it whole"):
        check_full_depth(3, "n_layer", (1, 2, 3))
    with pytest.raises(DepthError, match="not a whole number"):
        check_full_depth(None, "n_layer", (2, 4))


def test_the_arithmetic_is_linear_in_depth_and_the_band_widens():
    assert at_depth([(2, 3.0), (4, 5.0)], 32) == pytest.approx(33.0)
    assert at_depth([(1, 2.0), (2, 3.0), (3, 4.0)], 32) == pytest.approx(33.0)
    assert at_depth([(2, 5.0), (4, 4.0)], 32) == 4.0  # a deeper copy that measured less adds nothing
    assert at_depth([(2, None), (4, 4.0)], 32) is None
    assert widen((90.0, 110.0), 100.0, 0.1) == pytest.approx((81.0, 121.0))


def test_activation_terms_recover_fixed_linear_and_quadratic_parts():
    pts = [(b, s, 100 + 8 * b * s + 0.5 * b * s * s) for b in (1, 2) for s in (8, 16)]
    assert activation_terms(pts) == pytest.approx((100, 8, 0.5, None))
    fixed, per_token, quad, note = activation_terms([(1, 8, 64.0), (2, 8, 128.0)])
    assert (fixed, per_token, quad) == pytest.approx((0, 8, 0)) and "linear" in note


LM = {"d_model": 16, "heads": 2, "seq_len": 8, "vocab_size": 50, "batch_size": 4}
STEP0, PER_LAYER = 0.010, 0.004  # the fake measurement's seconds a step: outside the layers, per layer


def _probe(layers: int, depths=None, busy: float = 1.0):
    """Baseline only, timed by a fake whose step time is linear in the depth it measures; FLOPs,
    ops, traffic and parameters are the real counts. `busy`: how much slower the machine ran while
    the ladder probed the deepest copy than while the rounds timed the copies."""
    spec = WorkloadSpec(model="examples.tinylm:TinyLM", init_args={**LM, "layers": layers}, batch_size=4,
                        batch_size_fixed=True)

    def measure(rung, cfg):  # "depth N": a shallow copy timed in a round; else the probe of the deepest copy
        rounds = rung.startswith("depth ")
        depth = int(rung.split()[1]) if rounds else layers if depths is None else depths[-1]
        return fake_measurement(cfg.batch_size / ((STEP0 + PER_LAYER * depth) * (1 if rounds else busy)), cfg.batch_size)

    opts = ProbeOptions(spec=spec, accelerator="cpu", devices=1, tune=False, confirm_rounds=0, matmul_seconds=0.01,
                        depth_arg="layers" if depths else None, depths=depths)
    return probe.run_probe(opts, measure_fn=measure)


def test_two_shallow_copies_extrapolate_to_the_whole_model():
    whole, ext = _probe(6), _probe(6, depths=(1, 2))
    assert ext.workload == whole.workload and ext.workload_id == whole.workload_id
    x = ext.extrapolation
    assert x is not None and x.full_depth == 6 and [p.depth for p in x.points] == [1, 2] and x.depth_arg == "layers"
    assert whole.extrapolation is None
    assert ext.samples_per_sec == pytest.approx(whole.samples_per_sec, rel=1e-6)
    lo, hi = ext.samples_per_sec_ci  # the fake's CI is a point: widened by the measured error each side
    assert lo == pytest.approx(max(0.0, ext.samples_per_sec * (1 - x.relative_error)))
    assert hi == pytest.approx(ext.samples_per_sec * (1 + x.relative_error))
    from examples.tinylm import TinyLM

    assert ext.shape.parameters == sum(p.numel() for p in TinyLM(**LM, layers=6).parameters())  # counted on meta
    assert ext.flops_per_sample == pytest.approx(whole.flops_per_sample, rel=1e-6)
    assert ext.shape.ops_per_step == whole.shape.ops_per_step
    assert ext.shape.memory_traffic_bytes_per_sample == pytest.approx(whole.shape.memory_traffic_bytes_per_sample, rel=1e-6)
    assert ext.tokens_per_sec == pytest.approx(ext.samples_per_sec * 8)
    a = ext.shape.activations  # per layer: the same whichever depth counted it
    assert a is not None and a.layers == 2 and whole.shape.activations.layers == 6
    assert a.bytes_per_token_per_layer == pytest.approx(whole.shape.activations.bytes_per_token_per_layer)
    assert 0 < a.checkpointed_bytes_per_token_per_layer < a.bytes_per_token_per_layer
    assert {(p.batch_size, p.sequence_length) for p in a.points} == {(1, 4), (1, 8), (2, 4), (2, 8)}
    # checkpointing keeps a layer's input: [batch, sequence, d_model] fp32, 4 x 16 bytes a token
    assert a.checkpointed_bytes_per_token_per_layer == pytest.approx(4 * 16)


def test_depths_at_or_above_the_full_depth_or_on_a_builtin_are_one_line():
    with pytest.raises(WorkloadError, match="measure it whole"):
        probe.preflight(ProbeOptions(spec=WorkloadSpec(model="examples.tinylm:TinyLM", init_args={**LM, "layers": 2}),
                                     accelerator="cpu", depth_arg="layers", depths=(1, 2)))
    with pytest.raises(WorkloadError, match="takes no argument"):
        probe.preflight(ProbeOptions(spec=WorkloadSpec(model="examples.tinylm:TinyLM", init_args=LM),
                                     accelerator="cpu", depth_arg="n_layer", depths=(1, 2)))
    with pytest.raises(WorkloadError, match="builtin"):
        probe.preflight(ProbeOptions(spec=WorkloadSpec(model="mlp"), accelerator="cpu", depth_arg="layers", depths=(1, 2)))


def test_the_line_is_fitted_on_the_rounds_alone_with_its_fit_recorded():
    """The defect behind the benchmark's 59%: the deeper copy's figure came from its probe and the
    shallower copy's from a measurement minutes later, so whatever the machine did in between went
    into the slope. Here the machine ran 1.6x slower during the probe than during the rounds: the
    extrapolation reads the rounds alone (the old arithmetic read a slope of about -0.013 s a layer,
    clamped to 0, and the 6-layer model as fast as its 2-layer copy was while busy)."""
    whole, ext = _probe(6), _probe(6, depths=(1, 2, 3), busy=1.6)
    assert ext.samples_per_sec == pytest.approx(whole.samples_per_sec, rel=1e-6)
    x = ext.extrapolation
    assert [p.depth for p in x.points] == [1, 2, 3] and x.rounds == 4
    assert (x.intercept_s, x.slope_s) == pytest.approx((STEP0, PER_LAYER))
    assert x.step_band_s == pytest.approx((STEP0 + 6 * PER_LAYER,) * 2)
    assert ext.step_time.mean_s == pytest.approx(STEP0 + 6 * PER_LAYER)
    from advisor.render.probe import token_lines

    said = [line for line in token_lines(ext) if line.startswith("extrapolated:")]
    assert len(said) == 1 and "copies of depth 1, 2, 3" in said[0] and "a layer over 4 rounds" in said[0]


def test_the_rounds_time_every_depth_back_to_back_in_alternating_order():
    """Each round times every copy once, the order reversed every other round (no depth always
    first, after the machine's quietest or busiest stretch), each copy timed max_seconds / rounds."""
    from factories import fake_measurement as fake

    from lightning_module.contract.result import ProbeConfig
    from lightning_module.run.shallow import time_rounds

    opts = ProbeOptions(spec=WorkloadSpec(model="examples.tinylm:TinyLM", init_args={**LM, "layers": 8}),
                        depth_arg="layers", depths=(1, 2, 3), depth_rounds=3, max_seconds=6.0)
    config = ProbeConfig(accelerator="cpu", batch_size=4)
    calls = []

    def measure_one(depth, settings, label):
        calls.append((depth, settings.spec.init_args["layers"], settings.spec.batch_size, settings.max_seconds))
        return fake(4 / (STEP0 + PER_LAYER * depth), 4)

    rounds = time_rounds(opts, config, (1, 2, 3, 8), measure_one)
    assert [c[0] for c in calls] == [1, 2, 3, 8, 8, 3, 2, 1, 1, 2, 3, 8]
    assert all(d == layers and batch == 4 and secs == 2.0 for d, layers, batch, secs in calls)
    assert rounds.steps == [pytest.approx({d: STEP0 + PER_LAYER * d for d in (1, 2, 3, 8)})] * 3

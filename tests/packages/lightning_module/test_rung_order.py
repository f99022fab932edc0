"""The ladder's on/off rungs in the order of their expected gain per second, read from past
probes on the device class, else from the seeds' ladders (lightning_module/contract/order.py)."""

from __future__ import annotations

import pytest
from factories import probe_result

from lightning_module.contract import order as od
from lightning_module.contract.ladder import LadderOptions, RungMeasurement, run_ladder
from lightning_module.contract.result import HardwareFingerprint, ProbeConfig, RungResult

CFG = ProbeConfig(accelerator="cpu", batch_size=32)
HERE = HardwareFingerprint(cpu_model="Test CPU", physical_cores=4, isa_flags=["avx2"])  # factories' CPU


def rung(name, sps, *, kept=False, status="ok", steps=10, compile_s=None):
    if status != "ok":
        return RungResult(rung=name, config=CFG, status=status, error="x")
    return RungResult(rung=name, config=CFG, status="ok", samples_per_sec=sps, ci_low=sps * 0.9, ci_high=sps * 1.1,
                      steps_timed=steps, kept=kept, compile_seconds=compile_s)


def past(ladder, workload="resnet50", cpu="Test CPU"):
    r = probe_result(model=workload)
    return r.model_copy(update={"ladder": ladder, "hardware": r.hardware.model_copy(update={"cpu_model": cpu})})


def test_a_stored_ladder_says_each_rungs_gain_over_the_best_before_it_and_its_seconds():
    ev = od.ladder_evidence([rung("baseline", 10, kept=True), rung("bf16", 20, kept=True), rung("channels_last", 15),
                             rung("compile", 0, status="timeout"), rung("workers=2", 30, kept=True),
                             rung("workers=4", 27), rung("batch=64", 40, kept=True), rung("bf16@batch=64", 50)])
    assert [(e.kind, round(e.gain, 3)) for e in ev] == [
        ("precision", 1.0), ("channels_last", -0.25), ("compile", 0.0), ("workers", 0.5), ("workers", -0.1)]
    # 10 timed + 3 warm-up steps of batch 32 at 20 samples/s; a timeout's seconds are not known.
    assert ev[0].seconds == pytest.approx(13 * 32 / 20) and ev[2].seconds is None


def test_the_order_is_by_gain_per_second_unknown_kinds_keep_their_place_and_losers_go_last():
    ev = [od.Evidence("compile", 0.5, 100.0), od.Evidence("workers", 0.3, 10.0),  # 0.005/s and 0.03/s
          od.Evidence("precision", -0.2, 30.0)]  # lost: last
    assert od.rung_order(ev) == ("workers", "compile", "channels_last", "precision")
    assert od.rung_order([]) == od.ORDERABLE


def test_ordering_from_a_store_prefers_this_device_and_this_workload():
    # On this CPU, resnet50's past probe: workers gained much in little time, bf16 little in long.
    mine = past([rung("baseline", 10, kept=True), rung("bf16", 11, kept=True, steps=100),
                 rung("channels_last", 9), rung("compile", 9, compile_s=60.0), rung("workers=2", 20, kept=True, steps=5)])
    # Another workload on this CPU says the opposite: this workload's own probe wins.
    other = past([rung("baseline", 10, kept=True), rung("compile", 30, kept=True)], workload="resnet18")
    # Another CPU: not this device class, never read.
    elsewhere = past([rung("baseline", 10, kept=True), rung("channels_last", 50, kept=True)], cpu="Other CPU")
    got = od.order_for([elsewhere, other, mine], HERE, "cpu", mine.workload_id)
    assert got.kinds == ("workers", "precision", "channels_last", "compile") and "this workload" in got.basis
    # Without this workload's probe, the other workload's on this device: compile first.
    got = od.order_for([elsewhere, other], HERE, "cpu", mine.workload_id)
    assert got.kinds[0] == "compile" and "other workloads" in got.basis
    # A training run's record is no ladder.
    run = mine.model_copy(update={"source": "training run"})
    assert "seeds" in od.order_for([run], HERE, "cpu", mine.workload_id).basis


def test_with_an_empty_store_the_seeds_ladders_order_the_rungs():
    cpu = od.order_for([], HERE, "cpu", "w")
    # Article A: bf16 (+167%) then channels_last (+56%); compile and workers gained nothing there.
    assert cpu.kinds == ("precision", "channels_last", "compile", "workers") and "seeds" in cpu.basis
    # Article B (V100): workers (+116%), AMP (+48%), compile (+32%); channels_last not measured.
    assert od.order_for([], HERE, "gpu", "w").kinds == ("workers", "precision", "compile", "channels_last")


def test_the_ladder_climbs_its_on_off_rungs_in_the_order_given():
    seen = []

    def measure(name, cfg):
        seen.append(name)
        return RungMeasurement(10.0, 9.8, 10.2, steps_timed=10)

    start = ProbeConfig(accelerator="cpu", batch_size=32)
    run_ladder(start, measure, LadderOptions(worker_counts=(2,), order=("workers", "compile", "precision", "channels_last"),
                                             batch_fixed=True))
    assert seen == ["baseline", "workers=2", "compile", "bf16", "channels_last"]
    with pytest.raises(ValueError, match="rung order"):
        run_ladder(start, measure, LadderOptions(order=("compile",)))


def test_run_probe_climbs_in_the_order_its_past_probes_on_this_machine_say():
    from factories import fake_measurement

    from lightning_module.contract.result import WorkloadSpec
    from lightning_module.run import hardware, probe

    here = hardware.fingerprint()
    spec = WorkloadSpec(model="mlp", image_size=8, num_classes=10, batch_size=32)
    # A past probe of this workload on this machine: channels_last gained most per second, bf16 lost.
    before = past([rung("baseline", 10, kept=True), rung("bf16", 5), rung("channels_last", 30, kept=True, steps=5)],
                  workload="mlp")
    before = before.model_copy(update={"hardware": here, "workload": spec, "workload_id": spec.workload_id})
    seen = []

    def measure(name, cfg):
        seen.append(name)
        return fake_measurement(100.0, cfg.batch_size)

    opts = probe.ProbeOptions(spec=spec, accelerator="cpu", matmul_seconds=0.05, confirm_rounds=0, past=(before,),
                              skip=frozenset({"compile", "batch", "run_cpu", "ipex", "zentorch", "xla"}))
    result = probe.run_probe(opts, measure_fn=measure)
    names = [r.rung for r in result.ladder]
    # channels_last first (the mlp is no image model: recorded as skipped), then compile (--skip)
    # and workers, which no past probe measured, then bf16, which lost: the default climbs bf16 first.
    assert names.index("channels_last") < names.index("compile") < names.index("bf16")


def test_advisor_probe_reads_the_stores_probes_for_the_order_and_goes_on_without_a_readable_store(tmp_path, capsys):
    import argparse

    from advisor.commands.probe import _past_probes
    from advisor.store import ResultStore

    db = tmp_path / "r.db"
    assert _past_probes(argparse.Namespace(store=str(db))) == ()  # no store yet: this probe creates it
    with ResultStore(db) as s:
        s.add(probe_result("c7i.2xlarge"))
        s.add(probe_result("c7i.2xlarge", n=1).model_copy(update={"source": "training run"}))
    got = _past_probes(argparse.Namespace(store=str(db)))
    assert len(got) == 1 and got[0].source == "probe"
    bad = tmp_path / "not-a-store.db"
    bad.write_text("not sqlite")
    assert _past_probes(argparse.Namespace(store=str(bad))) == ()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "seeds' order" in err and "Traceback" not in err

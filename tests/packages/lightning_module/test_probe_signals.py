"""`advisor probe` stopped by a real signal, and the requests it refuses before measuring."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from checkout import ROOT as CHECKOUT

from advisor.store import ResultStore

ROOT = str(CHECKOUT)


def start_probe(tmp_path):
    """A tiny baseline-only probe that would time steps for 60 s: long enough to be stopped."""
    env = {**os.environ, "PYTHONPATH": ROOT, "INSTANCE_ADVISOR_DATA_DIR": str(tmp_path / "data")}
    argv = [sys.executable, "-m", "advisor", "probe", "--workload", "mlp", "--image-size", "8",
            "--num-classes", "10", "--batch-size", "4", "--no-tune", "--warmup-steps", "1",
            "--max-seconds", "60", "--target-ci", "0.0001", "--store", str(tmp_path / "r.db"),
            "--output", str(tmp_path / "out.json")]
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize(("sig", "code", "name"), [(signal.SIGTERM, 143, "SIGTERM"), (signal.SIGINT, 130, "SIGINT")])
def test_a_signal_during_a_probe_exits_with_its_code_and_stores_nothing(tmp_path, sig, code, name):
    proc = start_probe(tmp_path)
    try:
        first = proc.stderr.readline()  # the header: the handlers are in place from here on
        assert first.startswith("probe: mlp-8px-10c on cpu"), first
        time.sleep(4)  # into the Trainer's steps (or still building it: the answer is the same)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == code, err
    lines = [x for x in err.splitlines() if x.strip()]
    assert lines[-1] == f"advisor: probe stopped by {name}: nothing was stored", err
    assert "Traceback" not in err
    assert not (tmp_path / "out.json").exists()
    assert not (tmp_path / "r.db").exists() or ResultStore(tmp_path / "r.db").count() == 0


def test_a_signal_while_the_result_is_written_waits_for_the_write(cli, tmp_path, monkeypatch):
    """Held during the write: the result is stored whole, then the probe stops with the signal's code."""
    from factories import probe_result

    from advisor.commands import probe as probe_cmd
    from lightning_module.run import probe

    monkeypatch.setattr(probe, "run_probe", lambda opts, **kw: probe_result())
    real_write = probe_cmd._write_result

    def write_then_signal(path, result):
        os.kill(os.getpid(), signal.SIGTERM)  # arrives mid-write
        real_write(path, result)

    monkeypatch.setattr(probe_cmd, "_write_result", write_then_signal)
    db, out = tmp_path / "r.db", tmp_path / "out.json"
    code, _, err = cli("probe", "--workload", "mlp", "--store", str(db), "--output", str(out))
    assert code == 143 and "stopped by SIGTERM after its result was saved" in err
    assert out.exists() and ResultStore(db).count() == 1
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the command put the handlers back


@pytest.mark.parametrize("kind", ["file", "dir"])
def test_profile_to_an_existing_file_or_full_dir_fails_before_measuring(cli, tmp_path, kind):
    target = tmp_path / "prof"
    if kind == "file":
        target.write_text("x")
    else:
        target.mkdir()
        (target / "old.pt.trace.json").write_text("{}")
    code, _, err = cli("probe", "--workload", "mlp", "--no-tune", "--profile", str(target),
                       "--store", str(tmp_path / "r.db"))
    assert code == 2 and err.count("\n") == 1 and "--profile" in err
    assert ("is a file" if kind == "file" else "is not empty") in err
    assert "probe: baseline" not in err  # refused before any training


def test_more_cpu_ranks_than_cores_is_refused(cli, tmp_path):
    cores = len(os.sched_getaffinity(0))
    code, _, err = cli("probe", "--workload", "mlp", "--accelerator", "cpu", "--devices", str(cores + 1),
                       "--store", str(tmp_path / "r.db"))
    assert code == 2 and err.count("\n") == 1
    assert f"--devices {cores + 1}: this process may run on {cores} CPU core(s)" in err


# --- issue 21: the documented exit codes on every signal path -----------------------------------


def test_sigterm_while_the_probe_imports_torch_is_the_same_stop(cli, tmp_path, monkeypatch):
    from advisor.commands import probe as probe_cmd

    def signal_during_imports():
        os.kill(os.getpid(), signal.SIGTERM)  # before the header: torch and Lightning still importing
        time.sleep(5)

    monkeypatch.setattr(probe_cmd, "require_probe_extra", signal_during_imports)
    code, _, err = cli("probe", "--workload", "mlp", "--store", str(tmp_path / "r.db"))
    assert code == 143 and err.strip().splitlines()[-1] == "advisor: probe stopped by SIGTERM: nothing was stored", err
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_a_second_ctrl_c_while_the_first_unwinds_keeps_the_first_stop(cli, tmp_path, monkeypatch):
    from lightning_module.run import probe

    def run_probe(opts, **kw):
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        finally:  # stopping a child process, say: the impatient user presses Ctrl-C again
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(probe, "run_probe", run_probe)
    code, _, err = cli("probe", "--workload", "mlp", "--no-tune", "--store", str(tmp_path / "r.db"))
    assert code == 130 and err.strip().splitlines()[-1] == "advisor: probe stopped by SIGINT: nothing was stored", err
    assert not (tmp_path / "r.db").exists() or ResultStore(tmp_path / "r.db").count() == 0


def test_sigterm_during_a_catalog_refresh_exits_143_and_keeps_the_catalog(cli, monkeypatch):
    from advisor.paths import catalog_cache_path
    from catalog import clouds

    cat = catalog_cache_path()
    cat.parent.mkdir(parents=True, exist_ok=True)
    cat.write_bytes((CHECKOUT / "catalog" / "data" / "snapshot.json").read_bytes())
    before = cat.read_bytes()

    def slow_refresh(**kw):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)

    monkeypatch.setattr(clouds, "refresher", lambda cloud: slow_refresh)
    code, _, err = cli("catalog", "refresh", "--regions", "us-east-1")
    assert code == 143 and err == "advisor: terminated\n", err
    assert cat.read_bytes() == before
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL

"""`advisor launch` with your own code (--code, --requirements, a --config in --probe-args): checked
before anything starts, bundled and uploaded beside the package, fetched and installed by the
instance's script; and the probe plan's launch line names it."""

from __future__ import annotations

import base64
import io
import shlex
import subprocess
import tarfile
import textwrap
import zipfile
from types import SimpleNamespace

import pytest
from test_launch import BUCKET, aws, base_args, errors, launched, run_calls  # noqa: F401 (fixtures)

from advisor.ec2 import aws as ec2_aws
from advisor.ec2 import manifest as manifests
from advisor.ec2.code import check_code, code_path_hint, shipped_config
from advisor.ec2.userdata import ProbeScript, render
from advisor.errors import AdvisorError

WORKLOAD = "mypkg.lm:TinyLM"


def package_folder(root, name: str = "mypkg"):
    pkg = root / name
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "lm.py").write_text("class TinyLM: ...\n")
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "lm.cpython-311.pyc").write_bytes(b"\0")
    return pkg


def project(root):
    root.mkdir()
    package_folder(root / "src")
    (root / "pyproject.toml").write_text(textwrap.dedent("""\
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "mypkg"
        version = "0.1.0"
        [tool.setuptools.packages.find]
        where = ["src"]
        """))
    return root


def bundle_names(aws_, run_id: str) -> set[str]:
    body = aws_.s3.get_object(Bucket=BUCKET, Key=f"probes/{run_id}/code/code.tar.gz")["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body)) as tar:
        return set(tar.getnames())


def test_a_package_folder_requirements_and_config_go_up_as_one_bundle(aws, run_calls, cli, tmp_path):  # noqa: F811
    pkg = package_folder(tmp_path)
    req = tmp_path / "requirements.txt"
    req.write_text("sentencepiece>=0.2\n")
    cfg = tmp_path / "lm.yaml"
    cfg.write_text("model:\n  init_args: {d_model: 64}\n")
    code, _out, err = cli(*base_args(aws, "g5.xlarge", "--workload", WORKLOAD, "--code", str(pkg),
                                     "--requirements", str(req), "--probe-args", f"--config {cfg} --max-seconds 20",
                                     "--yes"))
    assert code == 0, err
    (run_id,) = manifests.list_run_ids()
    m = manifests.load(run_id)
    assert m.code == f"probes/{run_id}/code/code.tar.gz"
    assert m.probe_args == ["--config", "code/config/lm.yaml", "--max-seconds", "20"]  # the copy the bundle holds
    names = bundle_names(aws, run_id)
    assert {"src/mypkg/__init__.py", "src/mypkg/lm.py", "requirements.txt", "config/lm.yaml"} <= names
    assert not any("__pycache__" in n for n in names)
    (call,) = launched(run_calls.calls)
    ud = base64.b64decode(call["UserData"]).decode() if not call["UserData"].startswith("#!") else call["UserData"]
    assert "code.tar.gz" in ud and "--config code/config/lm.yaml" in ud and 'PYTHONPATH="$WORK/code/src' in ud


def test_a_project_is_built_into_a_wheel_without_touching_it(aws, run_calls, cli, tmp_path):  # noqa: F811
    root = project(tmp_path / "proj")
    before = sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))
    code, _out, err = cli(*base_args(aws, "g5.xlarge", "--workload", WORKLOAD, "--code", str(root), "--yes"))
    assert code == 0, err
    (run_id,) = manifests.list_run_ids()
    (wheel,) = [n for n in bundle_names(aws, run_id) if n.endswith(".whl")]
    assert wheel.startswith("wheels/mypkg-0.1.0-")
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) == before  # no build/ nor egg-info


def test_a_wheel_is_shipped_as_given(aws, run_calls, cli, tmp_path):  # noqa: F811
    whl = tmp_path / "mypkg-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as z:
        z.writestr("mypkg/__init__.py", "")
        z.writestr("mypkg/lm.py", "")
    code, _out, err = cli(*base_args(aws, "g5.xlarge", "--workload", WORKLOAD, "--code", str(whl), "--yes"))
    assert code == 0, err
    (run_id,) = manifests.list_run_ids()
    assert bundle_names(aws, run_id) == {"wheels/mypkg-0.1.0-py3-none-any.whl"}


def _refused(cli, monkeypatch, *argv) -> str:
    monkeypatch.setattr(ec2_aws, "client", lambda *a, **k: pytest.fail("no AWS call expected"))
    code, _out, err = cli("launch", "--instance-types", "g5.xlarge", "--s3", f"s3://{BUCKET}/probes", "--region",
                          "us-east-1", "--yes", *argv)
    assert code == 2, err
    (line,) = errors(err)
    return line


def test_your_own_workload_without_code_is_refused_before_any_aws_call(cli, monkeypatch):
    line = _refused(cli, monkeypatch, "--workload", WORKLOAD)
    assert "--workload mypkg.lm:TinyLM is your own code: give --code PATH" in line


@pytest.mark.parametrize("make, words", [
    (lambda d: d / "nothing", "no such file or folder"),
    (lambda d: package_folder(d, "otherpkg"), "ships the package 'otherpkg'; --workload mypkg.lm:TinyLM imports 'mypkg'"),
    (lambda d: (d / "empty").mkdir() or d / "empty", "neither a project"),
    (lambda d: (d / "x.tar.gz").write_text("") or d / "x.tar.gz", "a file must be a wheel"),
])
def test_code_that_cannot_hold_the_workload_is_one_line(cli, monkeypatch, tmp_path, make, words):
    assert words in _refused(cli, monkeypatch, "--workload", WORKLOAD, "--code", str(make(tmp_path)))


def test_requirements_naming_local_files_are_refused(cli, monkeypatch, tmp_path):
    pkg = package_folder(tmp_path)
    req = tmp_path / "requirements.txt"
    req.write_text("numpy\n-e ../mylib\n")
    line = _refused(cli, monkeypatch, "--workload", WORKLOAD, "--code", str(pkg), "--requirements", str(req))
    assert "requirements.txt:2: '-e ../mylib' names a local file" in line


def test_requirements_in_utf16_are_refused(tmp_path):
    pkg = package_folder(tmp_path)
    req = tmp_path / "requirements.txt"
    req.write_bytes("numpy\n".encode("utf-16"))
    with pytest.raises(AdvisorError, match="not UTF-8"):
        check_code(str(pkg), WORKLOAD, str(req))


def test_a_project_that_does_not_package_the_workload_is_said_when_built(tmp_path):
    from advisor.ec2.code import build_bundle

    root = project(tmp_path / "proj")
    (root / "other").mkdir()
    (root / "other" / "__init__.py").write_text("")
    code = check_code(str(root), "other.m:C")  # other/ is there, but the project packages only src/mypkg
    with pytest.raises(AdvisorError, match="has no package 'other'"):
        build_bundle(code, tmp_path, top="other")


def test_config_in_probe_args_points_at_the_bundle():
    assert shipped_config(["--config", "/a/b/lm.yaml", "--max-seconds", "5"]) == (
        ["--config", "code/config/lm.yaml", "--max-seconds", "5"], "/a/b/lm.yaml")
    assert shipped_config(["--config=c.yaml"]) == (["--config=code/config/c.yaml"], "c.yaml")
    assert shipped_config(["--max-seconds", "5"]) == (["--max-seconds", "5"], None)


def test_the_script_fetches_unpacks_and_installs_the_code_only_when_given():
    base = {"run_id": "r", "instance_type": "g5.xlarge", "workload": WORKLOAD, "max_minutes": 30, "result_url": "https://r",
                "log_url": "https://l", "package_spec": "instance-advisor"}
    assert "code.tar.gz" not in render(ProbeScript(**base))
    ud = render(ProbeScript(**base, code_url="https://c?X-Amz-Signature=1&b=2"))
    fetch, install = ud.index("code.tar.gz"), ud.index('"$WORK/code"/wheels/*.whl')
    assert ud.index("'instance-advisor[probe]'") < install and fetch < install  # after the advisor, same constraints
    assert "-r \"$WORK/code/requirements.txt\"" in ud and "'https://c?X-Amz-Signature=1&b=2'" in ud
    assert subprocess.run(["bash", "-n"], input=ud, text=True, check=False).returncode == 0


def test_the_probe_plan_names_the_code(tmp_path, monkeypatch):
    from advisor.recommend.jobspec import JobSpec
    from advisor.recommend.probeplan.commands import probe_commands

    package_folder(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert code_path_hint(WORKLOAD) == "mypkg"
    assert code_path_hint("nowhere_pkg.m:C") == "YOUR_PACKAGE"
    job = JobSpec(samples=1e6, budget_usd=10, deadline_hours=10, workload=WORKLOAD, init_args={"d_model": 64})
    row = SimpleNamespace(region="us-east-1", market="on-demand", instance_type="g5.xlarge", cpu_too=False)
    argv = probe_commands(job, [row])[0].argv
    assert argv[argv.index("--code") + 1] == "mypkg" and argv[argv.index("--workload") + 1] == "mypkg.lm:TinyLM"
    # --probe-args is one argument that the instance splits back into the probe's own arguments
    probe_args = next(a for a in argv if a.startswith("--probe-args=")).split("=", 1)[1]
    assert shlex.split(probe_args) == ["--init-args", '{"d_model": 64}']


def test_a_folder_of_modules_is_shipped_onto_the_instance_s_python_path(tmp_path, monkeypatch):
    """What `advisor probe` imported through PYTHONPATH (gan.py in a plain folder) is --code too:
    the folder itself goes up as src/, which the instance puts on PYTHONPATH; the hint names it."""
    from advisor.ec2.code import build_bundle

    mods = tmp_path / "models"
    mods.mkdir()
    (mods / "gan.py").write_text("class TinyGAN: pass\n")
    (mods / "helpers.py").write_text("X = 1\n")
    code = check_code(str(mods), "gan:TinyGAN")
    assert code.kind == "modules"
    out = tmp_path / "out"
    out.mkdir()
    with tarfile.open(build_bundle(code, out, top="gan")) as tar:
        assert {"src/gan.py", "src/helpers.py"} <= set(tar.getnames())
    monkeypatch.syspath_prepend(str(mods))
    monkeypatch.chdir(tmp_path)
    assert code_path_hint("gan:TinyGAN") == "models"
    with pytest.raises(AdvisorError, match="nor a folder holding gan.py or gan/"):
        check_code(str(tmp_path / "out"), "gan:TinyGAN")

"""One vocabulary across commands: list options, the instance-type filter rule, --version, the
subcommand's help on an unknown option, and the catalog-age warning said once a day."""

from __future__ import annotations

import json
import os
import shlex
import stat
from datetime import datetime, timedelta, timezone

import pytest

from advisor import __version__
from advisor.cli import build_parser
from advisor.commands import common
from catalog.filters import FilterError, TypeFilter, accelerator_matches
from catalog.io import SNAPSHOT_PATH, load
from catalog.models import InstanceType
from safeio import save_atomic

QUIET = ("--max-age", "100000")


def _show(cli, *args):
    code, out, err = cli("catalog", "show", "--format", "json", *QUIET, *args)
    assert code == 0, err
    return json.loads(out)["offers"]


# --- list options ---------------------------------------------------------------------------

@pytest.mark.parametrize("argv, want", [
    (["--family", "g5,g6"], ["g5", "g6"]),
    (["--family", "g5", "--family", "g6"], ["g5", "g6"]),
    (["--family", "G5, g6", "--family", "P4D,g5"], ["g5", "g6", "p4d"]),
    (["--family", "g5,"], ["g5"]),
])
def test_list_option_grammar(argv, want):
    args = build_parser().parse_args(["recommend", "--budget", "1", "--deadline", "1d", "--samples", "1", *argv])
    assert args.family == want


def test_list_option_empty_is_refused(cli):
    code, _out, err = cli("catalog", "show", "--family", ",")
    assert code == 2 and "argument --family: give at least one value" in err and "advisor catalog show --help" in err


@pytest.mark.parametrize("argv", [
    ["catalog", "show", "--region", "us-east-1,us-west-2", "--family", "G5,g6e"],
    ["catalog", "show", "--region", "us-east-1", "--region", "US-WEST-2", "--family", "g5", "--family", "g6e"],
])
def test_region_and_family_lists_in_catalog_show(cli, argv):
    code, out, _err = cli(*argv[:2], *argv[2:], "--format", "json", *QUIET)
    rows = json.loads(out)["offers"]
    assert code == 0 and {r["region"] for r in rows} == {"us-east-1", "us-west-2"}
    assert {r["family"] for r in rows} == {"g5", "g6e"}


def test_refresh_keeps_the_old_spellings_hidden():
    p = build_parser()
    old = p.parse_args(["catalog", "refresh", "--regions", "us-east-1", "US-WEST-2", "--families", "g5,G6"])
    new = p.parse_args(["catalog", "refresh", "--region", "us-east-1,us-west-2", "--family", "g5", "--family", "g6"])
    assert old.region == new.region == ["us-east-1", "us-west-2"] and old.family == new.family == ["g5", "g6"]
    helptext = p._subparsers._group_actions[0].choices["catalog"]._subparsers._group_actions[0].choices["refresh"].format_help()
    assert "--region" in helptext and "--regions" not in helptext and "--families" not in helptext


def test_launch_instance_type_list_keeps_the_plural_alias_and_duplicates():
    p = build_parser()
    a = p.parse_args(["launch", "--instance-types", "g5.xlarge,G6.xlarge"])
    b = p.parse_args(["launch", "--instance-type", "g5.xlarge", "--instance-type", "g6.xlarge,g5.xlarge"])
    assert a.instance_type == ["g5.xlarge", "g6.xlarge"]
    assert b.instance_type == ["g5.xlarge", "g6.xlarge", "g5.xlarge"]  # launch refuses duplicates itself


def test_probe_skip_list_repeats_and_checks_names():
    p = build_parser()
    assert p.parse_args(["probe", "--skip", "compile", "--skip", "BATCH,ipex"]).skip == ["compile", "batch", "ipex"]
    with pytest.raises(SystemExit):
        p.parse_args(["probe", "--skip", "warp"])


# --- the filter rule ------------------------------------------------------------------------

def _gpu(name, model, kind="gpu", count=1, arch="x86_64"):
    return InstanceType(name=name, family=name.split(".")[0], vcpus=8, memory_gib=32, arch=arch,
                        accelerator_kind=kind, accelerator_model=model, accelerator_count=count)


@pytest.mark.parametrize("query, model, hit", [
    ("NVIDIA A100", "A100-40GB", True),
    ("a100", "A100-80GB", True),
    ("A100 80GB", "A100-40GB", False),
    ("A100 80GB", "A100-80GB", True),
    ("Tesla T4", "T4", True),
    ("T4g", "T4", True),  # AWS's name for the g5g's T4, through the accelerator table
    ("L4", "L40S", False),
    ("nvidia l40s", "L40S", True),
    ("A10", "A10G", False),
    ("H100", "H100", True),
    ("NVIDIA", "H200", True),  # the vendor alone
    # Devices the accelerator table does not know carry AWS's own name in the catalog.
    ("B300", "B300", True),
    ("nvidia b300", "B300", True),
    ("B200", "B300", False),
    ("Trainium2", "Trainium2", True),
    ("trainium", "Trainium2", False),
    ("Trainium2", "Trainium", False),
    ("RTX PRO Server 6000", "RTX PRO Server 6000", True),
    ("rtx pro 6000", "RTX PRO Server 6000", False),  # words side by side, in order
    ("rtx pro server", "RTX PRO Server 6000", True),
])
def test_accelerator_names(query, model, hit):
    kind = "neuron" if "rainium" in model else "gpu"
    assert accelerator_matches(query, _gpu("x1.2xlarge", model, kind)) is hit


@pytest.mark.parametrize("query, kind, hit", [("gpu", "gpu", True), ("GPU", "neuron", False), ("neuron", "neuron", True),
                                              ("cpu", "none", True), ("none", "gpu", False)])
def test_accelerator_kinds(query, kind, hit):
    it = _gpu("x1.2xlarge", None if kind == "none" else "T4", kind, 0 if kind == "none" else 1)
    assert accelerator_matches(query, it) is hit


def test_type_filter_arch_and_min_gpus():
    small, big, arm = _gpu("g5.xlarge", "A10G"), _gpu("g5.48xlarge", "A10G", count=8), _gpu("g5g.xlarge", "T4", arch="arm64")
    f = TypeFilter(min_gpus=4)
    assert [f(t) for t in (small, big, arm)] == [False, True, False]
    assert [TypeFilter(arch="arm64")(t) for t in (small, big, arm)] == [False, False, True]
    assert TypeFilter(accelerators=("T4", "a10g"))(arm) and TypeFilter(accelerators=("T4", "a10g"))(big)


def test_filter_check_names_what_the_catalog_has():
    cat = load(SNAPSHOT_PATH)
    with pytest.raises(FilterError, match="unknown region 'mars-1'"):
        TypeFilter().check(cat, ["mars-1"])
    with pytest.raises(FilterError, match=r"unknown instance family 'g9'.*it has c6i"):
        TypeFilter(families=("g9",)).check(cat)
    with pytest.raises(FilterError, match=r"accelerator 'X100': it has A100-40GB, A100-80GB, A10G"):
        TypeFilter(accelerators=("X100",)).check(cat)
    TypeFilter(families=("g5",), accelerators=("gpu", "nvidia a100")).check(cat, ["us-east-1"])


def test_catalog_show_finds_a_device_without_a_spec(cli, tmp_path):
    """A refreshed catalog carries AWS's name for devices the table lacks: they are listable."""
    cat = load(SNAPSHOT_PATH)
    p6 = cat.instance_types["p6-b200.48xlarge"].model_copy(update={"name": "p6-b300.48xlarge", "accelerator_model": "B300"})
    trn2 = cat.instance_types["trn1.32xlarge"].model_copy(update={"name": "trn2.48xlarge", "family": "trn2",
                                                                  "accelerator_model": "Trainium2"})
    types = {**cat.instance_types, p6.name: p6, trn2.name: trn2}
    offers = {r: ro.model_copy(deep=True) for r, ro in cat.offers.items()}
    for src, dst in (("p6-b200.48xlarge", p6.name), ("trn1.32xlarge", trn2.name)):
        o = next(o for o in cat.iter_offers("us-east-1") if o.instance_type == src and o.market == "on-demand")
        offers["us-east-1"].append(o.model_copy(update={"instance_type": dst}))
    path = tmp_path / "cat.json"
    save_atomic(cat.model_copy(update={"instance_types": types, "offers": offers}), path)
    for query, want in (("B300", "p6-b300.48xlarge"), ("nvidia b300", "p6-b300.48xlarge"), ("Trainium2", "trn2.48xlarge")):
        rows = _show(cli, "--catalog", str(path), "--accelerator", query, "--market", "on-demand")
        assert {r["instance_type"] for r in rows} == {want}, query


def test_catalog_show_new_filters(cli):
    rows = _show(cli, "--accelerator", "NVIDIA A100", "--region", "us-east-1", "--market", "on-demand")
    assert {r["instance_type"] for r in rows} == {"p4d.24xlarge", "p4de.24xlarge"}
    rows = _show(cli, "--accelerator", "Tesla T4", "--arch", "arm64")
    assert rows and {r["family"] for r in rows} == {"g5g"}
    rows = _show(cli, "--min-gpus", "8", "--accelerator", "gpu,neuron")
    assert rows and all(r["accelerator_count"] >= 8 for r in rows)
    assert {r["accelerator_kind"] for r in rows} == {"gpu", "neuron"}


def test_catalog_show_nothing_matches_says_so(cli):
    code, out, err = cli("catalog", "show", "--family", "g5", "--accelerator", "H100", *QUIET)
    assert code == 0 and out == "" and "no offer in this catalog matches these filters" in err


# --- --version and the help an error points to ----------------------------------------------

def test_version(cli):
    code, out, _ = cli("--version")
    assert code == 0 and out.strip() == f"advisor {__version__}"


def test_version_is_the_distributions():
    from importlib.metadata import PackageNotFoundError, version

    try:
        assert version("instance-advisor") == __version__
    except PackageNotFoundError:
        pytest.skip("instance-advisor is not installed in this environment")


@pytest.mark.parametrize("argv, prog", [
    (["recommend", "--budget", "5", "--deadline", "1d", "--samples", "1e6", "--frobnicate"], "advisor recommend"),
    (["catalog", "show", "--bogus"], "advisor catalog show"),
    (["launch", "cancel", "RUN", "--bogus", "x"], "advisor launch cancel"),
    (["results", "list", "--nope"], "advisor results list"),
])
def test_unknown_option_points_to_the_subcommands_help(cli, argv, prog):
    code, out, err = cli(*argv)
    assert code == 2 and out == ""
    assert err.startswith(f"{prog}: error: unrecognized arguments:") and f"(see '{prog} --help')" in err
    assert err.count("\n") == 1


# --- the catalog-age warning ----------------------------------------------------------------

def _warnings(cli, *args):
    code, _out, err = cli("catalog", "info", "--format", "json", *args)
    assert code == 0, err
    return err.count("days old")


def test_age_warning_once_a_day_per_catalog(cli, tmp_path):
    assert _warnings(cli) == 1
    assert _warnings(cli) == 0  # said today already
    other = tmp_path / "other.json"
    other.write_bytes(SNAPSHOT_PATH.read_bytes())
    assert _warnings(cli, "--catalog", str(other)) == 1  # another catalog: its own day
    stamp = common.cache_dir() / common.AGE_STAMP_NAME
    said = json.loads(stamp.read_text())["said"]
    assert len(said) == 2
    # A day later it is said again.
    said = {k: (datetime.fromisoformat(v) - timedelta(days=1, minutes=1)).isoformat() for k, v in said.items()}
    stamp.write_text(json.dumps({"said": said}))
    assert _warnings(cli) == 1 and _warnings(cli) == 0


def test_age_warning_with_a_broken_stamp_is_said(cli):
    stamp = common.cache_dir() / common.AGE_STAMP_NAME
    stamp.parent.mkdir(parents=True)
    stamp.write_text("{not json")
    assert _warnings(cli) == 1 and _warnings(cli) == 0  # rewritten whole


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_age_warning_with_a_read_only_cache_dir(cli):
    d = common.cache_dir()
    d.mkdir(parents=True)
    d.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        assert _warnings(cli) == 1 and _warnings(cli) == 1  # said every time, nothing breaks
        assert list(d.iterdir()) == []
    finally:
        d.chmod(stat.S_IRWXU)


def test_age_warning_when_the_stamp_cannot_be_written(cli, monkeypatch):
    """Whatever stops the write (read-only dir, full disk), the command goes on and warns."""
    def refuse(*_a, **_k):
        raise PermissionError(13, "Read-only file system")

    monkeypatch.setattr(common, "save_atomic", refuse)
    assert _warnings(cli) == 1 and _warnings(cli) == 1


def test_cache_dir_is_a_file_does_not_break_the_command(cli, tmp_path, monkeypatch):
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    monkeypatch.setenv("INSTANCE_ADVISOR_CACHE_DIR", str(blocker / "sub"))
    assert _warnings(cli) == 1


def test_max_age_from_the_environment(cli, monkeypatch):
    monkeypatch.setenv(common.MAX_AGE_ENV, "100000")
    assert _warnings(cli) == 0
    assert _warnings(cli, "--max-age", "1") == 1  # the option wins
    monkeypatch.setenv(common.MAX_AGE_ENV, "1")
    assert _warnings(cli, "--catalog", str(SNAPSHOT_PATH)) == 0  # said today already (same catalog)


@pytest.mark.parametrize("value", ["soon", "-1", "nan", "inf"])
def test_bad_max_age_environment_is_one_line(cli, monkeypatch, value):
    monkeypatch.setenv(common.MAX_AGE_ENV, value)
    code, out, err = cli("catalog", "info")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "$INSTANCE_ADVISOR_MAX_AGE must be a number of days" in err


@pytest.mark.parametrize("value", ["soon", "-1", "nan"])
def test_bad_max_age_option(cli, value):
    code, _out, err = cli("catalog", "info", "--max-age", value)
    assert code == 2 and "--max-age" in err and "advisor catalog info --help" in err


def test_stamp_is_written_atomically(cli, monkeypatch):
    """The stamp goes through save_atomic (temporary file + rename), never written in place."""
    seen = []
    real = common.save_atomic
    monkeypatch.setattr(common, "save_atomic", lambda model, path, **kw: (seen.append(path), real(model, path, **kw)))
    _warnings(cli)
    assert seen == [common.cache_dir() / common.AGE_STAMP_NAME]
    assert [p.name for p in common.cache_dir().iterdir()] == [common.AGE_STAMP_NAME]


def test_recent_catalog_has_no_warning_and_no_stamp(cli, tmp_path):
    cat = load(SNAPSHOT_PATH).model_copy(update={"fetched_at": datetime.now(timezone.utc)})
    path = tmp_path / "fresh.json"
    save_atomic(cat, path)
    assert _warnings(cli, "--catalog", str(path)) == 0
    assert not (common.cache_dir() / common.AGE_STAMP_NAME).exists()


# --- recommend takes the same filters, by the same rule --------------------------------------

def _recommend(cli, *args):
    code, out, err = cli("recommend", "--budget", "1e9", "--deadline", "1000d", "--samples", "1e6", "--top", "10000",
                         "--show-excluded", "--format", "json", *QUIET, *args)
    assert code == 0, err
    doc = json.loads(out)
    priced = [e for e in doc["excluded"] if not e["reason"].startswith("no on-demand price")]
    return {r["instance_type"] for r in doc["recommendations"]}, {e["instance_type"] for e in priced}


@pytest.mark.parametrize("filters", [
    ("--accelerator", "NVIDIA A100"),
    ("--accelerator", "Tesla T4,l40s"),
    ("--accelerator", "neuron"),
    ("--arch", "arm64", "--accelerator", "gpu"),
    ("--min-gpus", "8"),
    ("--family", "G5,g6", "--family", "P4D"),
    ("--accelerator", "gpu", "--region", "EU-WEST-1,us-west-2", "--min-gpus", "4"),
])
def test_recommend_filters_match_catalog_show(cli, filters):
    ranked, excluded = _recommend(cli, *filters)
    shown = {r["instance_type"] for r in _show(cli, "--market", "on-demand", *filters)}
    assert shown and ranked | excluded == shown  # neuron types are all excluded (no measurement)


def test_recommend_arch_and_min_gpus_hold_in_every_row(cli):
    # 1e6 samples: arm64 is CPUs only since g5g's T4G is excluded (no PyTorch CUDA build for it on arm64)
    code, out, _err = cli("recommend", "--budget", "5000", "--deadline", "2d", "--samples", "1e6", "--arch", "arm64",
                         "--format", "json", *QUIET)
    cat = load(SNAPSHOT_PATH)
    rows = json.loads(out)["recommendations"]
    assert code == 0 and rows and all(cat.instance_types[r["instance_type"]].arch == "arm64" for r in rows)
    code, out, _err = cli("recommend", "--budget", "5000", "--deadline", "2d", "--samples", "1e8", "--min-gpus", "8",
                         "--format", "json", *QUIET)
    rows = json.loads(out)["recommendations"]
    assert code == 0 and rows and all(cat.instance_types[r["instance_type"]].accelerator_count >= 8 for r in rows)


@pytest.mark.parametrize("args, needle", [
    (("--accelerator", "X100"), "no instance type in this catalog has accelerator 'X100'"),
    (("--family", "g9"), "unknown instance family 'g9'"),
    (("--region", "mars-1"), "unknown region 'mars-1'"),
    (("--min-gpus", "-1"), "--min-gpus: must be at least 0"),
])
def test_recommend_bad_filters_are_one_line(cli, args, needle):
    code, out, err = cli("recommend", "--budget", "500", "--deadline", "2d", "--samples", "1e8", *QUIET, *args)
    assert code == 2 and out == "" and needle in err and err.count("\n") == 1


def test_recommend_arch_choices(cli):
    code, _out, err = cli("recommend", "--budget", "500", "--deadline", "2d", "--samples", "1e8", "--arch", "sparc")
    assert code == 2 and "invalid choice: 'sparc'" in err and "advisor recommend --help" in err


@pytest.mark.parametrize("argv0, want", [
    (".venv/bin/advisor", ".venv/bin/advisor"),
    ("/opt/my tools/bin/advisor", "'/opt/my tools/bin/advisor'"),
    ("advisor", "advisor"),
    ("/x/advisor/__main__.py", "advisor"),  # python -m advisor
    ("pytest", "advisor"),
])
def test_printed_command_lines_start_as_the_user_ran_advisor(cli, monkeypatch, argv0, want):
    """The probe commands recommend prints are copied and run: they name the advisor as invoked."""
    monkeypatch.setattr("sys.argv", [argv0])
    code, out, _err = cli("recommend", "--budget", "500", "--deadline", "2d", "--samples", "1e8", "--format", "json",
                          *QUIET)
    cmds = json.loads(out)["probe_commands"]
    program = shlex.split(want)[0]  # the argument, unquoted
    assert code == 0 and cmds[0]["argv"][:3] == [program, "launch", "--instance-type"]
    assert cmds[-2]["argv"][:3] == [program, "results", "pull"] and cmds[-1]["argv"][:3] == [program, "probe", "--workload"]
    code, out, _err = cli("recommend", "--budget", "500", "--deadline", "2d", "--samples", "1e8", *QUIET)
    assert f"  {want} launch --instance-type " in out and f"  {want} results pull " in out  # the shell lines


def test_probe_without_its_extra_says_what_to_install(cli, monkeypatch):
    """The core install has no torch: `advisor probe` says so in one line, exit 2 (the fresh-venv
    test in test_install.py shows it for real)."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in ("torch", "lightning") else real(name, *a))
    code, out, err = cli("probe", "--workload", "mlp")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "lacks torch, lightning" in err and "pip install 'instance-advisor[probe]'" in err


@pytest.mark.parametrize("argv", [
    ["launch", "--instance-type", "g5.xlarge", "--s3", "s3://b/p", "--region", "us-east-1,us-west-2"],
    ["launch", "status", "RUN", "--region", "us-east-1,us-west-2"],
    ["results", "pull", "s3://b/p", "--region", "eu-west-1,us-east-1"],
])
def test_aws_region_options_take_one_region(cli, argv):
    code, out, err = cli(*argv)
    assert code == 2 and out == "" and "give one region" in err and err.count("\n") == 1


def test_aws_region_option_is_case_insensitive():
    assert build_parser().parse_args(["launch", "status", "RUN", "--region", "US-EAST-1"]).region == "us-east-1"

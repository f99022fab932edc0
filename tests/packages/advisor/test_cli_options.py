"""Nonsense is refused, not answered; exit statuses mean what they say.

Every option is bounded to what it can mean (advisor/options.py) and refused in one line with exit
2; the CLI never prints a traceback, and a bug (which these tests must never find) is one line with
exit 70. The statuses are documented in docs/exit-codes.md and advisor/errors.py."""

from __future__ import annotations

import json
import math
import tempfile
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from recommend_catalogs import write_catalog
from unprivileged import run_as_reader, shared_dir

from advisor.cli import EXIT_INTERNAL, EXIT_SIGINT, EXIT_USER, build_parser

_DIR = Path(tempfile.mkdtemp(prefix="cli-options-"))
CATALOG = write_catalog(_DIR / "cat.json")
JOB = ["--budget", "500", "--deadline", "2d", "--samples", "1e8", "--catalog", CATALOG, "--max-age", "100000"]


def without(args: list[str], *names: str) -> list[str]:
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in names:
            skip = True
            continue
        out.append(a)
    return out


def one_line_error(code: int, out: str, err: str) -> None:
    assert code == EXIT_USER, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("advisor") and "error" in lines[0], err
    assert "Traceback" not in err and "Warning" not in err


def run(cli, *argv: str):
    # numpy's RuntimeWarnings (overflow, division by zero) would mean arithmetic on nonsense went
    # ahead: make them errors, which the CLI turns into exit 70 and these tests into failures.
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        return cli(*argv)


# --- the examples ----------------------------------------------------------------------


@pytest.mark.parametrize("argv", [
    ["--budget=500,00"], ["--budget=1e-320"], ["--budget=1e300"], ["--setup-minutes=1e308"],
    ["--checkpoint-minutes=1e308"], ["--restart-minutes=-1"], ["--deadline=PT0.0000001S"], ["--deadline=PT0.5S"],
    ["--samples=1.5"], ["--samples=0.5"], ["--samples=1e300"], ["--max-age=nan"], ["--max-age=inf"],
    ["--max-age=-1"], ["--catalog="], ["--store="], ["--top=1e3"], ["--top=0"], ["--max-instances=65"],
    ["--image-size=1e9"], ["--num-classes=1"], ["--min-accelerator-memory=nan"], ["--workload=\udcff"],
    ["--workload=\x1b[2J"], ["--datamodule="],
])
def test_recommend_refuses(cli, argv):
    name = argv[0].split("=")[0]
    base = without(JOB, name) if name in JOB else JOB
    one_line_error(*run(cli, "recommend", *base, *argv))


def test_epochs_times_dataset_size_is_bounded(cli):
    base = without(JOB, "--samples")
    one_line_error(*run(cli, "recommend", *base, "--epochs", "1e300", "--dataset-size", "1e300"))
    one_line_error(*run(cli, "recommend", *base, "--epochs", "1e6", "--dataset-size", "1e12"))  # 1e18 samples
    one_line_error(*run(cli, "recommend", *base, "--epochs", "2", "--dataset-size", "1000.5"))  # half a sample
    code, out, err = run(cli, "recommend", *base, "--epochs", "0.5", "--dataset-size", "1001", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["job"]["samples"] == 501  # a fraction of an epoch is fine; rounded up


@pytest.mark.parametrize("budget, samples", [("1,000", "1e8"), ("2.5k", "120M"), ("0.01", "1"), ("1e9", "1e15"),
                                             ("1,234,567.5", "120_000_000")])
def test_sensible_spellings_are_answered(cli, budget, samples):
    base = without(JOB, "--budget", "--samples")
    code, out, err = run(cli, "recommend", *base, "--budget", budget, "--samples", samples, "--format", "json")
    assert code == 0, err
    assert "NaN" not in out and "Infinity" not in out


@pytest.mark.parametrize("argv", [
    ["results", "list", "--workload", "\udcff"], ["results", "list", "--instance-type", "\udcfe\udcff"],
    ["results", "show", "\udcff"], ["results", "show", ""], ["results", "delete", "\x1b[31m"],
    ["results", "export", "--workload", ""], ["results", "pull", "s3://b/p", "--run", ""],
    ["results", "pull", "s3://b/p", "--run", "\udcff"], ["results", "import", ""],
    ["catalog", "info", "--catalog", ""], ["catalog", "show", "--max-age", "nan"],
    ["catalog", "refresh", "--spot-advisor", ""],
    ["launch", "status", "x" * 5000], ["launch", "cancel", "x" * 5000], ["launch", "status", ".."],
    ["launch", "status", "a/b"],  # a run id too long for the file system, or a path: one line, not exit 70
])
def test_other_commands_refuse(cli, argv):
    one_line_error(*run(cli, *argv))


# --- every option, fuzzed ----------------------------------------------------------------------

_hostile_text = st.one_of(st.text(max_size=30), st.sampled_from(["\udcff", "\x1b[2J", "", " ", "..", ".hidden", "a/b",
                                                                 "x" * 5000, "%", "_", "*", "\u202e", "\x00"]))
TEXT_SLOTS = [
    ["catalog", "show", "--family"], ["catalog", "show", "--region"], ["catalog", "show", "--accelerator"],
    ["references", "list", "--device"], ["references", "list", "--model"],
    ["results", "list", "--workload"], ["results", "list", "--instance-type"], ["results", "show"],
    ["recommend", *JOB, "--region"], ["recommend", *JOB, "--family"], ["recommend", *JOB, "--workload"],
    ["recommend", *JOB, "--datamodule"],
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(slot=st.sampled_from(TEXT_SLOTS), value=_hostile_text)
def test_any_text_in_any_text_option_is_answered_or_refused_in_one_line(cli, slot, value, tmp_path):
    code, out, err = run(cli, *slot, value, *(["--store", str(tmp_path / "none.db")] if slot[0] == "results" else []))
    assert code in (0, EXIT_USER), (slot, code, err)
    assert "Traceback" not in err and "\x1b" not in err + out
    if code == EXIT_USER:  # one error line (beside the catalog-age warning, if any)
        assert [line for line in err.splitlines() if "warning: catalog" not in line] == [
            next(line for line in err.splitlines() if "error" in line)], err

_value = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(-(10**40), 10**40).map(str),
    st.sampled_from(["1e308", "1e-320", "5e-324", "-0", "0", "nan", "NaN", "inf", "-inf", "1,5", "500,00", "1,000",
                     "0x10", "1_000", "", " ", "1e", "--1", "1.5", "9" * 400, "1e999", "2d", "PT0.0000001S",
                     "P2DT3H", "36h", "2999-01-01", "\udcff", "\x1b[2J", "120M", "3%", "0.03"]),
    st.text(max_size=12),
)

RECOMMEND_OPTIONS = ["--budget", "--samples", "--deadline", "--max-instances", "--top", "--image-size",
                     "--num-classes", "--checkpoint-minutes", "--restart-minutes", "--setup-minutes",
                     "--min-accelerator-memory", "--max-age", "--workload", "--catalog", "--store"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(option=st.sampled_from(RECOMMEND_OPTIONS), value=_value)
def test_recommend_answers_or_refuses_any_value_in_one_line(cli, option, value):
    base = without(JOB, option)
    code, out, err = run(cli, "recommend", *base, f"{option}={value}", "--format", "json")
    assert code in (0, EXIT_USER), (code, err)
    if code == EXIT_USER:
        one_line_error(code, out, err)
    else:
        assert "Traceback" not in err and "NaN" not in out and "Infinity" not in out


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(option=st.sampled_from(["--epochs", "--dataset-size"]), value=_value)
def test_work_as_epochs_answers_or_refuses_in_one_line(cli, option, value):
    base = [*without(JOB, "--samples"), "--epochs", "3", "--dataset-size", "1.28M"]
    code, out, err = run(cli, "recommend", *without(base, option), f"{option}={value}", "--format", "json")
    assert code in (0, EXIT_USER), (code, err)
    if code == EXIT_USER:
        one_line_error(code, out, err)


PARSER = build_parser()  # argparse parsers can be reused; building one takes ~0.1 s
PATH_OPTIONS = {"--catalog", "--store", "--output"}  # a file name on Linux may be any bytes
PARSER_OPTIONS = {
    "probe": ["--image-size", "--num-classes", "--batch-size", "--start-batch-size", "--target-ci", "--max-seconds",
              "--warmup-steps", "--max-steps", "--compile-timeout", "--devices", "--instance-type", "--workload",
              "--output", "--store"],
    "results list": ["--workload", "--instance-type", "--store"],
    "catalog show": ["--max-age", "--catalog"],
}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=st.sampled_from(sorted(PARSER_OPTIONS)), data=st.data(), value=_value)
def test_the_parser_takes_or_refuses_every_value_of_every_option(command, data, value, capsys):
    # The probe itself is not run here: the parser's answer is what is under test.
    option = data.draw(st.sampled_from(PARSER_OPTIONS[command]))
    try:
        args = PARSER.parse_args([*command.split(), f"{option}={value}"])
    except SystemExit as e:
        assert e.code == EXIT_USER
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
        return
    v = getattr(args, option.lstrip("-").replace("-", "_"))
    if isinstance(v, float):
        assert math.isfinite(v)
    if isinstance(v, str) and option not in PATH_OPTIONS:
        v.encode("utf-8")  # a value that reaches SQLite or a terminal is valid text


# --- exit statuses -----------------------------------------------------------------------------


def test_a_bug_is_one_line_and_exit_70(cli, monkeypatch, caplog):
    from advisor.commands import catalog

    def boom(args):
        raise RuntimeError("something that should never happen\nsecond line")

    monkeypatch.setattr(catalog, "cmd_info", boom)
    code, _, err = cli("catalog", "info")
    assert code == EXIT_INTERNAL == 70
    assert err.count("\n") == 1 and "internal error" in err and "Traceback" not in err
    code, _out, err = cli("-vv", "catalog", "info")
    assert code == 70 and "Traceback" in err + caplog.text  # -vv shows where (logged to stderr)


def test_ctrl_c_is_130_and_one_line(cli, monkeypatch):
    from advisor.commands import catalog

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(catalog, "cmd_info", interrupted)
    code, _out, err = cli("catalog", "info")
    assert code == EXIT_SIGINT == 130 and err == "advisor: interrupted\n"


# --- the catalog cache: a directory, a read-only folder ----------------------------------------


def test_a_cache_path_that_is_a_directory(cli, isolated_dirs):
    from advisor.paths import catalog_cache_path

    cache = catalog_cache_path()
    cache.mkdir(parents=True)
    code, out, err = cli("catalog", "info", "--max-age", "100000")
    assert code == 0 and "not a file" in err and "snapshot" in out
    code, out, err = cli("catalog", "refresh", "--regions", "us-east-1")
    one_line_error(code, out, err)
    assert "is a directory" in err
    assert cache.is_dir() and list(cache.iterdir()) == []


def test_a_read_only_cache_folder_is_said_before_any_aws_call():
    with shared_dir() as d:
        cache = d / "cache"
        cache.mkdir()
        cache.chmod(0o555)
        p = run_as_reader(["catalog", "refresh", "--regions", "us-east-1"], d)
        assert p.returncode == EXIT_USER, p.stderr
        assert "not writable" in p.stderr and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr
        assert list(cache.iterdir()) == []


def leaf_parsers():
    """(words, parser) of every command a user runs: advisor catalog show, ..., advisor launch."""
    import argparse

    from advisor.cli import build_parser

    out = []

    def walk(p, words):
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or words == ["launch"]:  # launch runs itself, and has status/cancel below
            out.append((words, p))
        for s in subs:
            for name, sp in s.choices.items():
                walk(sp, [*words, name])

    walk(build_parser(), [])
    return out


def test_every_subcommand_has_a_description_and_an_example_that_parses(capsys):
    """`advisor X Y --help` says what the command does and shows one command line that works."""
    import shlex

    from advisor.cli import build_parser

    leaves = leaf_parsers()
    assert {" ".join(w) for w, _ in leaves} >= {"catalog show", "catalog info", "catalog refresh", "results list",
                                               "results show", "results export", "references list", "launch status",
                                               "launch cancel", "launch", "recommend", "probe"}
    for words, p in leaves:
        assert p.description and len(p.description) > 40, words
        assert p.epilog and p.epilog.startswith("Example: advisor "), words
        argv = shlex.split(p.epilog.removeprefix("Example: advisor "))
        argv = argv[:argv.index(">")] if ">" in argv else argv
        assert argv[:len(words)] == words, (words, p.epilog)
        build_parser().parse_args(argv)  # exits 2 on a renamed option
        p.print_help()
        shown = " ".join(capsys.readouterr().out.split())
        assert "Example: advisor" in shown and " ".join(p.description.split())[:40] in shown
    for action in next(p for w, p in leaves if w == ["launch"])._actions:
        assert action.help or not action.option_strings, f"launch {action.option_strings} has no help"

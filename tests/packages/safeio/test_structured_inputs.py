"""Issue 34: the inputs added after issue 21 hold like the old ones. One test per class of hostile
input (configs, price files, shapes inside results, output names, signal sequences), each through
the CLI: one line, exit 2 (or 130/143 for a signal), nothing written, never a traceback; and a
property test that every structured reader refuses booleans where numbers are meant and nesting
past its limit, counted by the limit's own figure (the reader stops at MAX_DEPTH + 1 levels)."""

from __future__ import annotations

import os
import signal
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from advisor.errors import AdvisorError
from advisor.recommend.prices import load_prices
from lightning_module.contract.result import ONE_BYTE_GIB, MemoryFit, MemoryPoint
from lightning_module.contract.workload_config import WorkloadConfigError, read_config
from safeio import FileError, read_document
from safeio.structured import MAX_DEPTH

RECOMMEND = ("recommend", "--budget", "500", "--deadline", "2d", "--samples", "1e8")


def one_line(code: int, err: str, status: int = 2) -> None:
    assert code == status, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err


def bomb(levels: int = 9, width: int = 9) -> str:
    lines = ["a0: &a0 [" + ", ".join(["x"] * width) + "]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


CONFIGS = {
    "init_args a string": "model:\n  class_path: a.B\n  init_args: 'd_model=4'\n",
    "init_args a list": "model:\n  class_path: a.B\n  init_args: [1, 2]\n",
    "init_args a number": "model:\n  class_path: a.B\n  init_args: 3\n",
    "data dict_kwargs a list": "data:\n  class_path: a.D\n  dict_kwargs: [x]\n",
    "optimizer init_args a string": "model: a.B\noptimizer:\n  class_path: AdamW\n  init_args: lr\n",
    "flow nesting 1,000": "model: " + "[" * 1000 + "]" * 1000 + "\n",
    "flow nesting 100,000": "model: " + "{a: " * 100_000 + "1" + "}" * 100_000 + "\n",
    "block nesting 1,000": "model:\n" + "".join(" " * (i + 1) + f"k{i}:\n" for i in range(1000)),
    "alias bomb 9x9": bomb() + "model: {class_path: a.B, init_args: {x: *a8}}\n",
    "a 5,000-digit integer": "model: {class_path: a.B, init_args: {x: " + "9" * 5000 + "}}\n",
}


@pytest.mark.parametrize("case", CONFIGS)
def test_configs(cli, tmp_path, case):
    f = tmp_path / "c.yaml"
    f.write_text(CONFIGS[case])
    with pytest.raises(WorkloadConfigError):
        read_config(str(f))
    one_line(*cli(*RECOMMEND, "--config", str(f))[::2])


PRICES = {
    "percent: true": "discounts:\n  - {market: on-demand, percent: true}\n",
    "percent: yes": "discounts:\n  - {market: on-demand, percent: yes}\n",
    "percent: on": "discounts:\n  - {market: on-demand, percent: on}\n",
    "usd_per_hour: true": "overrides:\n  - {instance_type: g5.2xlarge, usd_per_hour: true}\n",
    "count: true": "reserved:\n  - {instance_type: g5.2xlarge, count: true}\n",
    "price 5e-324": "overrides:\n  - {instance_type: g5.2xlarge, usd_per_hour: 5.0e-324}\n",
    "price below a tenth of a cent": "overrides:\n  - {instance_type: g5.2xlarge, usd_per_hour: 0.0009}\n",
    "YAML nesting 1,000": "discounts:\n" + "".join(" " * (i + 1) + f"k{i}:\n" for i in range(1000)),
    "flow nesting 100,000": "discounts: " + "[" * 100_000 + "]" * 100_000 + "\n",
    "alias bomb": bomb() + "discounts: *a8\n",
    "a list, not a mapping": "- {percent: 5}\n",
}


@pytest.mark.parametrize("case", PRICES)
def test_price_files(cli, tmp_path, case):
    f = tmp_path / "p.yaml"
    f.write_text(PRICES[case])
    with pytest.raises(AdvisorError):
        load_prices(f)
    one_line(*cli(*RECOMMEND, "--prices", str(f), "--format", "html", str(tmp_path / "a.html"))[::2])
    assert not (tmp_path / "a.html").exists()


def test_a_discounted_price_stays_above_the_floor(tmp_path):
    """Stacked discounts cannot take a price (and its log, on the page's axis) to 0."""
    import numpy as np

    f = tmp_path / "p.yaml"
    f.write_text("discounts:\n" + "  - {percent: 99.99}\n" * 200)
    price, _ = load_prices(f).apply(["g5"], ["g5.2xlarge"], "us-east-1", ["on-demand"], np.array([1.2]))
    assert price[0] == pytest.approx(0.001)


@pytest.mark.parametrize("per_sample", [5e-324, 1e-320, 1e-306, ONE_BYTE_GIB / 2])
def test_shapes_below_a_byte_a_sample_are_refused(per_sample):
    with pytest.raises(ValidationError, match="less than one byte a sample"):
        MemoryFit(where="accelerator", points=[MemoryPoint(batch_size=8, peak_gib=2.0)], fixed_gib=1.0,
                  per_sample_gib=per_sample)


def test_the_largest_batch_is_bounded_where_it_is_computed():
    from lightning_module.contract.result import MAX_BATCH_SIZE

    fit = MemoryFit(where="accelerator", points=[MemoryPoint(batch_size=8, peak_gib=1.0)], fixed_gib=0.0,
                    per_sample_gib=ONE_BYTE_GIB)
    assert fit.largest_batch(1e6) == MAX_BATCH_SIZE
    # fitted slopes under a byte (noise) read as flat, so a probe never stores one
    assert MemoryFit.fitted("host", [(1, 1.0), (2, 1.0 + 1e-12)]).per_sample_gib == 0.0


NAMES = {"300 characters": "a" * 300 + "{ext}", "invalid UTF-8": os.fsdecode(b"\xff\xfe") + "{ext}",
         "a 5,000-byte path": "d/" * 2500 + "x{ext}"}


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("option", ["--plot", "--format html"])
def test_output_names(cli, tmp_path, monkeypatch, name, option):
    monkeypatch.chdir(tmp_path)
    ext = ".svg" if option == "--plot" else ".html"
    one_line(*cli(*RECOMMEND, *option.split(), NAMES[name].format(ext=ext))[::2])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", NAMES)
def test_a_price_file_name_is_checked_too(cli, tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    one_line(*cli(*RECOMMEND, "--prices", NAMES[name].format(ext=".yaml"))[::2])


SEQUENCES = {
    "SIGTERM, SIGTERM 0.3 s later": ((signal.SIGTERM, signal.SIGTERM), 143),
    "SIGTERM, then SIGINT": ((signal.SIGTERM, signal.SIGINT), 143),
    "SIGINT, then SIGTERM": ((signal.SIGINT, signal.SIGTERM), 130),
}


@pytest.mark.parametrize("case", SEQUENCES)
def test_signal_sequences(cli, tmp_path, monkeypatch, case):
    """The first signal decides; the second, arriving while the first unwinds the command (here:
    while its half-written file is removed), is ignored; the file is gone and the status is the first's."""
    from advisor.commands import catalog

    (first, second), status = SEQUENCES[case]
    part = tmp_path / "catalog.json.tmp"

    def command(args):
        part.write_text("half")
        try:
            os.kill(os.getpid(), first)
            time.sleep(5)  # the signal interrupts this
        finally:
            os.kill(os.getpid(), second)
            time.sleep(0.3)
            part.unlink()
        return 0

    monkeypatch.setattr(catalog, "cmd_info", command)
    code, _, err = cli("catalog", "info")
    one_line(code, err, status)
    assert not part.exists()


def test_signals_are_handled_while_the_command_line_is_parsed(cli, monkeypatch):
    """From main()'s first line: a SIGTERM while the commands are imported is 143, not death by the signal."""
    import advisor.cli as cli_module

    real = cli_module.build_parser

    def slow_parser():
        os.kill(os.getpid(), signal.SIGTERM)
        return real()

    monkeypatch.setattr(cli_module, "build_parser", slow_parser)
    one_line(*cli("catalog", "info")[::2], 143)


# Property: every structured reader refuses a boolean where a number is meant, and nesting past
# its limit, whatever the nesting's shape; the limit is the count the reader stops at.
NUMBER_FIELDS = [("discounts", "percent", {"market": "spot"}), ("overrides", "usd_per_hour", {"instance_type": "g5.xlarge"}),
                 ("reserved", "count", {"instance_type": "g5.xlarge"})]
BOOLEANS = ["true", "false", "yes", "no", "on", "off", "True", "YES"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(NUMBER_FIELDS), word=st.sampled_from(BOOLEANS), json=st.booleans())
def test_readers_refuse_booleans_where_numbers_are_meant(tmp_path, field, word, json):
    section, key, rest = field
    f = tmp_path / ("p.json" if json else "p.yaml")
    value = ("true" if word.lower() in ("true", "yes", "on") else "false") if json else word
    body = ", ".join(f'"{k}": "{v}"' for k, v in rest.items())
    f.write_text(f'{{"{section}": [{{{body}, "{key}": {value}}}]}}')
    with pytest.raises(AdvisorError, match=key):
        load_prices(f)


@settings(max_examples=40, deadline=None)
@given(opens=st.lists(st.sampled_from(["[", "{a: ", "- "]), min_size=MAX_DEPTH + 1, max_size=3 * MAX_DEPTH),
       fmt=st.sampled_from(["yaml", "json"]))
def test_readers_refuse_nesting_past_their_limit(opens, fmt):
    flow = [o for o in opens if o != "- "] if fmt == "json" else opens
    if fmt == "yaml":  # block sequences nest by indentation: write them as such, after the flow levels
        flow = [o for o in opens if o != "- "]
        blocks = len(opens) - len(flow)
        text = "".join("  " * i + "-\n" for i in range(blocks)) + "  " * blocks + "".join(flow) + "1" + "".join(
            "]" if o == "[" else "}" for o in reversed(flow))
        depth = blocks + len(flow)
    else:
        flow = [o.replace("{a: ", '{"a": ') for o in flow]
        text = "".join(flow) + "1" + "".join("]" if o == "[" else "}" for o in reversed(flow))
        depth = len(flow)
    if depth <= MAX_DEPTH:
        read_document(text, "t", fmt)  # within the limit: read
        return
    with pytest.raises(FileError, match=f"more than {MAX_DEPTH} levels"):
        read_document(text, "t", fmt)


def test_the_limit_is_the_line(tmp_path):
    """Exactly MAX_DEPTH levels read; one more is refused (the count, not a time, is the test)."""
    for fmt, o, c in (("yaml", "[", "]"), ("json", "[", "]")):
        read_document(o * (MAX_DEPTH - 1) + "1" + c * (MAX_DEPTH - 1), "t", fmt)
        with pytest.raises(FileError):
            read_document(o * (MAX_DEPTH + 1) + "1" + c * (MAX_DEPTH + 1), "t", fmt)

"""Bad input to `advisor recommend`: one line on stderr, exit 2, never a traceback."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from recommend_catalogs import make_catalog, write_catalog

from catalog.models import SCHEMA_VERSION, Catalog

_DIR = Path(tempfile.mkdtemp(prefix="recommend-bad-"))
CATALOG = write_catalog(_DIR / "cat.json")
GOOD = ["--budget", "500", "--deadline", "2d", "--samples", "1e8", "--catalog", CATALOG]


def with_(**over):
    args = dict(zip(GOOD[::2], GOOD[1::2]))
    for k, v in over.items():
        args["--" + k.replace("_", "-")] = v
    out = []
    for k, v in args.items():
        if v is not None:
            out += [k, v]
    return out


def assert_user_error(code, out, err):
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("advisor")
    assert "error" in lines[0]
    assert "Traceback" not in err


def empty_catalog(tmp_path):
    c = make_catalog()
    empty = Catalog(schema_version=SCHEMA_VERSION, source="file", fetched_at=c.fetched_at, regions=c.regions,
                    instance_types=c.instance_types, offers={})
    return write_catalog(tmp_path / "empty.json", empty)


@pytest.mark.parametrize("over", [
    {"budget": "0"}, {"budget": "-5"}, {"budget": "nan"}, {"budget": "inf"}, {"budget": "lots"},
    {"deadline": "2020-01-01T00:00"}, {"deadline": "soon"}, {"deadline": "0h"}, {"deadline": "P"},
    {"samples": "0"}, {"samples": "-1e8"}, {"samples": "nan"}, {"samples": None},
    {"workload": "bogus"}, {"workload": "my.module:Model"}, {"workload": "vit_b_16", "image_size": "100"},
    {"region": "mars-north-1"}, {"family": "zz9"},
    {"max_instances": "0"}, {"max_instances": "1000"}, {"max_instances": "two"}, {"top": "0"},
    {"checkpoint_minutes": "0"}, {"checkpoint_minutes": "nan"}, {"restart_minutes": "-1"},
    {"min_accelerator_memory": "-4"}, {"objective": "best"}, {"market": "reserved"},
    {"catalog": "/nonexistent/catalog.json"}, {"plot": "out.jpg"}, {"format": "xml"},
])
def test_fixed_bad_cases(cli, over):
    assert_user_error(*cli("recommend", *with_(**over)))


def test_epochs_without_dataset_size(cli):
    assert_user_error(*cli("recommend", *with_(samples=None, epochs="3")))
    assert_user_error(*cli("recommend", *with_(epochs="3", dataset_size="1000")))  # and --samples too


def test_empty_catalog(cli, tmp_path):
    assert_user_error(*cli("recommend", *with_(catalog=empty_catalog(tmp_path))))


def test_broken_catalog_file(cli, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert_user_error(*cli("recommend", *with_(catalog=str(bad))))


def test_epochs_and_dataset_size_work(cli):
    code, out, err = cli("recommend", *with_(samples=None, epochs="90", dataset_size="1.28M"))
    assert code == 0, err
    assert "1.152e+08 samples" in out


_bad_number = st.one_of(
    st.floats(max_value=0, allow_nan=False).map(repr),
    st.sampled_from(["nan", "NaN", "inf", "-inf", "1e999", "", " ", "0x10", "1/2", "€5", "--1"]),
    st.text(alphabet="abcxyz!?#$ ", min_size=1, max_size=8),
)
_any_text = st.text(min_size=0, max_size=12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(["budget", "samples"]), value=_bad_number)
def test_property_bad_amounts(cli, field, value):
    # "--x=value" so a value starting with "-" is not taken for an option.
    args = [a for a in with_(**{field: None})] + [f"--{field}={value}"]
    assert_user_error(*cli("recommend", *args))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(["budget", "deadline", "samples", "workload", "region", "family", "max-instances",
                              "checkpoint-minutes", "min-accelerator-memory", "top"]), value=_any_text)
def test_property_any_text_is_answered_or_refused_in_one_line(cli, field, value):
    args = [a for a in with_(**{field.replace("-", "_"): None})] + [f"--{field}={value}"]
    code, out, err = cli("recommend", *args)
    assert "Traceback" not in err
    if code != 0:
        assert_user_error(code, out, err)
    else:
        assert "rank" in out or "Nothing meets" in out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(budget=st.floats(min_value=0.01, max_value=1e7), hours=st.floats(min_value=1 / 60, max_value=1e5),
       samples=st.integers(min_value=1, max_value=10**13))
def test_property_valid_input_always_answers(cli, budget, hours, samples):
    code, out, err = cli("recommend", "--budget", repr(budget), "--deadline", f"{hours!r}h", "--samples", repr(samples),
                         "--catalog", CATALOG, "--format", "json")
    assert code == 0, err
    import json

    doc = json.loads(out)
    rows = doc["recommendations"] or doc["closest"]
    for r in rows:
        assert math.isfinite(r["cost_usd"]) and math.isfinite(r["hours"])
        if r["feasible"]:
            assert r["cost_usd"] <= budget * (1 + 1e-12) and r["hours_pessimistic"] <= hours * (1 + 1e-9)


def test_an_image_side_that_is_not_whole_patches_is_refused_by_the_contracts_rule(cli):
    """contract.result.misfit_patch: the rule recommend and the probe both ask."""
    from lightning_module.contract.result import misfit_patch

    assert (misfit_patch("vit_b_16", 200), misfit_patch("vit_b_16", 224), misfit_patch("resnet50", 200)) == (16, None, None)
    code, out, err = cli("recommend", *with_(workload="vit_b_16", image_size="200"))
    assert (code, out) == (2, "")
    assert err == "advisor: error: vit_b_16 needs --image-size divisible by 16 (its patch size), got 200\n"

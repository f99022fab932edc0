"""The disk cache of the cross-device model (advisor/estimate/cache.py): a hit is exactly the
model a fresh build gives; any changed input is a miss; an unreadable, corrupt or foreign entry
is rebuilt; a cache dir that cannot be written is skipped. Never a traceback, never another
answer."""

from __future__ import annotations

import json
import sys
import types

import numpy as np
import pytest
from unprivileged import run_as_reader, shared_dir

from advisor import throughput as tp
from advisor.estimate import cache
from advisor.estimate.model import build
from advisor.references import REFERENCE_PATH, read_references
from catalog import accelerators as acc
from catalog.io import SNAPSHOT_PATH, load

RECOMMEND = ("recommend", "--budget", "500", "--deadline", "2d", "--samples", "1e8")


@pytest.fixture(scope="module")
def inputs():
    refs, digest = read_references(None)
    return refs.measurements, load(SNAPSHOT_PATH), digest


@pytest.fixture(scope="module")
def fresh(inputs):
    rows, catalog, _ = inputs
    return build(rows, catalog, "builtin")


def entries() -> list:
    return sorted(cache.folder().glob("*.json")) if cache.folder().exists() else []


def no_build(*a, **kw):
    raise AssertionError("built although an entry for these inputs was cached")


def test_a_hit_is_exactly_the_fresh_model_and_builds_nothing(inputs, fresh, monkeypatch):
    rows, catalog, digest = inputs
    first = cache.cached_build(rows, catalog, "builtin", digest)  # a miss: built and written
    assert repr(first) == repr(fresh)
    assert len(entries()) == 1
    monkeypatch.setattr(cache, "build", no_build)
    hit = cache.cached_build(rows, catalog, "builtin", digest)
    assert hit is not first and repr(hit) == repr(fresh)  # every float, int and tuple as built


def test_the_json_form_round_trips_every_value(fresh):
    again = cache.from_json(json.loads(json.dumps(cache.to_json(fresh))))
    assert repr(again) == repr(fresh)


def test_every_input_is_in_the_key(inputs, tmp_path, monkeypatch):
    rows, catalog, digest = inputs
    base = cache.key(rows, catalog, "builtin", digest)
    assert cache.key(rows, catalog, "builtin", digest) == base
    assert cache.key(rows, catalog, "team.json", digest) != base  # the name the model is shown by
    assert cache.key(rows, catalog, "builtin", "0" * 64) != base  # other reference bytes
    # The CPU rows take their peaks from the catalog: a changed fact of such a type is a miss ...
    cpu = next(m.instance_type for m in rows if m.device == "cpu" and m.instance_type in catalog.instance_types)
    it = catalog.instance_types[cpu]
    changed = catalog.model_copy(update={"instance_types": {**catalog.instance_types,
                                                            cpu: it.model_copy(update={"cpu_clock_ghz": it.cpu_clock_ghz * 1.5})}})
    assert cache.key(rows, changed, "builtin", digest) != base
    gone = catalog.model_copy(update={"instance_types": {k: v for k, v in catalog.instance_types.items() if k != cpu}})
    assert cache.key(rows, gone, "builtin", digest) != base
    # ... a type no row reads is not part of the model
    other = next(k for k, v in catalog.instance_types.items() if v.accelerator_kind != "none")
    moved = catalog.model_copy(update={"instance_types": {**catalog.instance_types, other: catalog.instance_types[
        other].model_copy(update={"vcpus": 1000})}})
    assert cache.key(rows, moved, "builtin", digest) == base
    # The accelerator table, the code that computes the model, numpy.
    table = tmp_path / "accelerators.json"
    table.write_bytes(acc.DATA_PATH.read_bytes() + b" ")
    with monkeypatch.context() as m:
        m.setattr(acc, "DATA_PATH", table)
        assert cache.key(rows, catalog, "builtin", digest) != base
    src = tmp_path / "model_code.py"
    src.write_text("X = 1\n")
    monkeypatch.setitem(sys.modules, "fake_model_code", types.SimpleNamespace(__file__=str(src)))
    monkeypatch.setattr(cache, "SOURCES", (*cache.SOURCES, "fake_model_code"))
    with_code = cache.key(rows, catalog, "builtin", digest)
    src.write_text("X = 2\n")
    assert cache.key(rows, catalog, "builtin", digest) != with_code
    monkeypatch.setattr(np, "__version__", "0.0.0")
    assert cache.key(rows, catalog, "builtin", digest) != with_code


def test_another_catalogs_cpu_facts_are_not_served_from_the_cache(inputs):
    rows, catalog, digest = inputs
    cpu = next(m.instance_type for m in rows if m.device == "cpu" and m.instance_type in catalog.instance_types)
    it = catalog.instance_types[cpu]
    changed = catalog.model_copy(update={"instance_types": {**catalog.instance_types,
                                                            cpu: it.model_copy(update={"cpu_clock_ghz": it.cpu_clock_ghz * 1.5})}})
    a = cache.cached_build(rows, catalog, "builtin", digest)
    b = cache.cached_build(rows, changed, "builtin", digest)
    assert repr(b) == repr(build(rows, changed, "builtin")) and repr(b) != repr(a)
    assert len(entries()) == 2


@pytest.mark.parametrize("damage", [
    b"", b"{not json", b"[]", b'{"key": "x"}', b"\xff\xfe",
    "truncated", "another key", "checksum", "wrong shape",
])
def test_a_damaged_entry_is_rebuilt_and_rewritten(inputs, fresh, damage):
    rows, catalog, digest = inputs
    cache.cached_build(rows, catalog, "builtin", digest)
    (path,) = entries()
    good = path.read_bytes()
    entry = json.loads(good)  # (damaged below)
    if damage == "truncated":
        data = good[: len(good) // 2]
    elif damage == "another key":
        data = json.dumps({**entry, "key": "0" * 64}).encode()
    elif damage == "checksum":  # a value changed after the entry was written
        entry["model"]["bands"]["model_scale"] *= 2
        data = json.dumps(entry).encode()
    elif damage == "wrong shape":  # the checksum matches, the content is not a model
        body = {**entry["model"], "points": [{"device": 3}]}
        data = json.dumps({**entry, "model": body, "sha256": cache._digest(body)}).encode()
    else:
        data = damage
    path.write_bytes(data)
    again = cache.cached_build(rows, catalog, "builtin", digest)
    assert repr(again) == repr(fresh)
    assert path.read_bytes() == good  # rewritten whole


def test_an_entry_that_is_a_folder_is_a_miss(inputs, fresh):
    rows, catalog, digest = inputs
    k = cache.key(rows, catalog, "builtin", digest)
    (cache.folder() / f"{k}.json").mkdir(parents=True)
    assert repr(cache.cached_build(rows, catalog, "builtin", digest)) == repr(fresh)


def test_a_cache_dir_that_cannot_be_written_is_skipped(inputs, fresh, tmp_path, monkeypatch):
    rows, catalog, digest = inputs
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("INSTANCE_ADVISOR_CACHE_DIR", str(blocker / "cache"))
    assert repr(cache.cached_build(rows, catalog, "builtin", digest)) == repr(fresh)


def test_old_entries_are_pruned(inputs):
    rows, catalog, digest = inputs
    for i in range(cache.KEEP + 3):
        cache.cached_build(rows, catalog, f"team-{i}.json", digest)
    assert len(entries()) == cache.KEEP


def test_recommend_prints_the_same_with_a_cold_a_warm_and_a_corrupt_cache(cli):
    tp._MODELS.clear()
    cold = cli(*RECOMMEND)
    assert cold[0] == 0 and len(entries()) == 1
    tp._MODELS.clear()
    warm = cli(*RECOMMEND, "--format", "json")
    tp._MODELS.clear()
    entries()[0].write_bytes(b"\x00" * 100)
    corrupt = cli(*RECOMMEND, "--format", "json")
    assert warm[:2] == corrupt[:2]
    tp._MODELS.clear()
    assert cli(*RECOMMEND)[1] == cold[1]


def test_a_team_reference_file_has_its_own_entry(cli, tmp_path):
    team = tmp_path / "team.json"
    doc = json.loads(REFERENCE_PATH.read_bytes())
    doc["measurements"] = doc["measurements"][::2]
    team.write_text(json.dumps(doc))
    tp._MODELS.clear()
    first = cli(*RECOMMEND, "--format", "json", "--references", str(team))
    tp._MODELS.clear()
    builtin = cli(*RECOMMEND, "--format", "json")
    assert first[0] == builtin[0] == 0 and first[1] != builtin[1] and len(entries()) == 2
    doc["measurements"] = doc["measurements"][::2]  # the same file name, other rows
    team.write_text(json.dumps(doc))
    tp._MODELS.clear()
    second = cli(*RECOMMEND, "--format", "json", "--references", str(team))
    assert second[1] != first[1] and len(entries()) == 3


def test_a_read_only_cache_dir_changes_nothing_but_speed():
    with shared_dir() as d:
        (d / "cache").mkdir()
        first = run_as_reader(list(RECOMMEND), d)  # the reader cannot write root's folder
        assert first.returncode == 0, first.stderr
        assert not (d / "cache" / cache.folder().name).exists()
        (d / "cache").chmod(0o777)
        second = run_as_reader(list(RECOMMEND), d)  # a cache dir it may write: the same answer
        assert second.returncode == 0 and second.stdout == first.stdout
        assert len(list((d / "cache" / cache.folder().name).glob("*.json"))) == 1
        assert "Traceback" not in first.stderr + second.stderr

"""The disk cache of the cross-device model (advisor/estimate/cache.py): a hit is exactly the
model a fresh build gives; any changed input is a miss; an unreadable, corrupt or foreign entry
is rebuilt; a cache dir that cannot be written is skipped. Never a traceback, never another
answer."""

from __future__ import annotations

import hashlib
import json
import sys
import types

import numpy as np
import pytest
from unprivileged import run_as_reader, shared_dir

from advisor.estimate import cache, references
from advisor.estimate import throughput as tp
from advisor.estimate.model import build
from advisor.estimate.references import REFERENCE_PATH, load_references
from catalog import accelerators as acc
from catalog.io import SNAPSHOT_PATH, load

RECOMMEND = ("recommend", "--budget", "500", "--deadline", "2d", "--samples", "1e8")


@pytest.fixture(scope="module")
def catalog():
    return load(SNAPSHOT_PATH)


@pytest.fixture(scope="module")
def fresh(catalog):
    rows = load_references().measurements
    return build(rows, catalog, "builtin"), [m for m in rows if m.instance_type]


def entries() -> list:
    return sorted(cache.folder().glob("*.json")) if cache.folder().exists() else []


def same(got, want) -> bool:
    """Every float, int, tuple and row exactly as a fresh build and a fresh parse give them."""
    return repr(got[0]) == repr(want[0]) and got[1] == want[1] and repr(got[1]) == repr(want[1])


def nothing_computed(monkeypatch):
    def fail(*a, **kw):
        raise AssertionError("computed although an entry for these inputs was cached")

    monkeypatch.setattr(cache, "build", fail)
    monkeypatch.setattr(references, "parse_file", fail)


def test_a_hit_is_exactly_the_fresh_model_and_rows_and_reads_nothing_else(catalog, fresh, monkeypatch):
    first = cache.model_for(REFERENCE_PATH, "builtin", catalog)  # a miss: parsed, built, written
    assert same(first, fresh) and len(entries()) == 1
    nothing_computed(monkeypatch)
    hit = cache.model_for(REFERENCE_PATH, "builtin", catalog)
    assert hit[0] is not first[0] and same(hit, fresh)


def test_the_json_form_round_trips_every_value(fresh):
    again = cache.from_json(json.loads(json.dumps(cache.to_json(fresh[0]))))
    assert repr(again) == repr(fresh[0])


def test_every_input_is_in_the_key(tmp_path, monkeypatch):
    digest = hashlib.sha256(REFERENCE_PATH.read_bytes()).hexdigest()
    base = cache.key(digest, "builtin")
    assert cache.key(digest, "builtin") == base
    assert cache.key(digest, "team.json") != base  # the name the model is shown by
    assert cache.key("0" * 64, "builtin") != base  # other reference bytes
    table = tmp_path / "accelerators.json"
    table.write_bytes(acc.DATA_PATH.read_bytes() + b" ")
    with monkeypatch.context() as m:
        m.setattr(acc, "DATA_PATH", table)
        assert cache.key(digest, "builtin") != base
    src = tmp_path / "model_code.py"
    src.write_text("X = 1\n")
    monkeypatch.setitem(sys.modules, "fake_model_code", types.SimpleNamespace(__file__=str(src)))
    monkeypatch.setattr(cache, "SOURCES", (*cache.SOURCES, "fake_model_code"))
    with_code = cache.key(digest, "builtin")
    src.write_text("X = 2\n")  # a changed formula
    assert cache.key(digest, "builtin") != with_code
    monkeypatch.setattr(np, "__version__", "0.0.0")
    assert cache.key(digest, "builtin") != with_code


def with_type(catalog, name, **update):
    it = catalog.instance_types[name]
    return catalog.model_copy(update={"instance_types": {**catalog.instance_types, name: it.model_copy(update=update)}})


def test_another_catalogs_cpu_facts_are_not_served_from_the_cache(catalog, monkeypatch):
    rows = load_references().measurements
    cpu = next(m.instance_type for m in rows if m.device == "cpu" and m.instance_type in catalog.instance_types)
    changed = with_type(catalog, cpu, cpu_clock_ghz=catalog.instance_types[cpu].cpu_clock_ghz * 1.5)
    a = cache.model_for(REFERENCE_PATH, "builtin", catalog)
    b = cache.model_for(REFERENCE_PATH, "builtin", changed)
    assert repr(b[0]) == repr(build(rows, changed, "builtin")) and repr(b[0]) != repr(a[0])
    gone = catalog.model_copy(update={"instance_types": {k: v for k, v in catalog.instance_types.items() if k != cpu}})
    assert repr(cache.model_for(REFERENCE_PATH, "builtin", gone)[0]) == repr(build(rows, gone, "builtin"))
    # A type no row reads is not part of the model: still a hit.
    cache.model_for(REFERENCE_PATH, "builtin", catalog)
    other = next(k for k, v in catalog.instance_types.items() if v.accelerator_kind != "none")
    nothing_computed(monkeypatch)
    assert repr(cache.model_for(REFERENCE_PATH, "builtin", with_type(catalog, other, vcpus=1000))[0]) == repr(a[0])


@pytest.mark.parametrize("damage", [
    b"", b"{not json", b"[]", b'{"key": "x"}', b"\xff\xfe",
    "truncated", "another key", "checksum", "wrong shape", "not a row",
])
def test_a_damaged_entry_is_rebuilt_and_rewritten(catalog, fresh, damage):
    cache.model_for(REFERENCE_PATH, "builtin", catalog)
    (path,) = entries()
    good = path.read_bytes()
    entry = json.loads(good)  # (damaged below)
    body = {part: entry[part] for part in ("model", "catalog", "rows")}
    if damage == "truncated":
        data = good[: len(good) // 2]
    elif damage == "another key":
        data = json.dumps({**entry, "key": "0" * 64}).encode()
    elif damage == "checksum":  # a value changed after the entry was written
        entry["model"]["bands"]["model_scale"] *= 2
        data = json.dumps(entry).encode()
    elif damage in ("wrong shape", "not a row"):  # the checksum matches, the content is not a model
        if damage == "wrong shape":
            body["model"] = {**body["model"], "points": [{"device": 3}]}
        else:
            body["rows"] = [{"id": 3}]
        data = json.dumps({**entry, **body, "sha256": cache._digest(body)}).encode()
    else:
        data = damage
    path.write_bytes(data)
    assert same(cache.model_for(REFERENCE_PATH, "builtin", catalog), fresh)
    assert path.read_bytes() == good  # rewritten whole


def test_an_entry_that_is_a_folder_is_a_miss(catalog, fresh):
    k = cache.key(hashlib.sha256(REFERENCE_PATH.read_bytes()).hexdigest(), "builtin")
    (cache.folder() / f"{k}.json").mkdir(parents=True)
    assert same(cache.model_for(REFERENCE_PATH, "builtin", catalog), fresh)


def test_a_cache_dir_that_cannot_be_written_is_skipped(catalog, fresh, tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("INSTANCE_ADVISOR_CACHE_DIR", str(blocker / "cache"))
    assert same(cache.model_for(REFERENCE_PATH, "builtin", catalog), fresh)


def test_old_entries_are_pruned(catalog):
    for i in range(cache.KEEP + 3):
        cache.model_for(REFERENCE_PATH, f"team-{i}.json", catalog)
    assert len(entries()) == cache.KEEP


def test_a_bad_reference_file_is_still_one_line_with_an_entry_for_another(cli, tmp_path):
    bad = tmp_path / "team.json"
    bad.write_text('{"schema_version": 2, "about": "x", "measurements": [{"id": 1}]}')
    assert cli(*RECOMMEND)[0] == 0  # the builtin set's entry exists
    code, out, err = cli(*RECOMMEND, "--references", str(bad))
    assert code == 2 and out == "" and err.count("\n") == 1 and str(bad) in err


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

"""--prices FILE: the team's own prices (advisor/recommend/prices.py) in every cost column and the probe plan."""

from __future__ import annotations

import json

import numpy as np
import pytest

from advisor.errors import AdvisorError
from advisor.recommend import rank as rk
from advisor.recommend.prices import load_prices
from catalog.io import SNAPSHOT_PATH, load

JOB = ("recommend", "--budget", "500", "--deadline", "2d", "--samples", "1e8", "--confidence", "0")


@pytest.fixture(scope="module")
def snapshot():
    return load(SNAPSHOT_PATH)


def write(tmp_path, text: str, name: str = "prices.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def list_price(catalog, name: str, region: str, market: str = "on-demand") -> float:
    ro = catalog.offers[region]
    return next(p for n, m, p in zip(ro.instance_type, ro.market, ro.usd_per_hour) if n == name and m == market)


def test_discounts_stack_an_override_replaces_and_reserved_is_on_demand_only(tmp_path):
    prices = load_prices(write(tmp_path, """
discounts:
  - {family: g5, percent: 30}
  - {market: on-demand, percent: 10}
overrides:
  - {instance_type: g6e.xlarge, region: us-east-1, usd_per_hour: 0.5}
reserved:
  - {instance_type: g4dn.xlarge, region: us-east-1, count: 2}
"""))
    price, free = prices.apply(["g5", "g5", "g6e", "g6e", "g4dn", "g4dn"],
                               ["g5.xlarge", "g5.xlarge", "g6e.xlarge", "g6e.xlarge", "g4dn.xlarge", "g4dn.xlarge"],
                               "us-east-1", ["on-demand", "spot", "on-demand", "spot", "on-demand", "spot"],
                               np.array([1.0, 0.4, 2.0, 0.8, 0.5, 0.2]))
    assert price.tolist() == pytest.approx([1.0 * 0.7 * 0.9, 0.4 * 0.7, 0.5, 0.5, 0.5 * 0.9, 0.2])
    assert free.tolist() == [0, 0, 0, 0, 2, 0]
    # Another region: the override and the reservation are us-east-1's only.
    price, free = prices.apply(["g6e", "g4dn"], ["g6e.xlarge", "g4dn.xlarge"], "us-west-2", ["on-demand"] * 2,
                               np.array([2.0, 0.5]))
    assert price.tolist() == pytest.approx([2.0 * 0.9, 0.5 * 0.9]) and free.tolist() == [0, 0]


def test_json_and_yaml_read_the_same(tmp_path):
    doc = {"discounts": [{"region": "us-east-1", "percent": 5}], "reserved": [{"instance_type": "p4d.24xlarge", "count": 1}]}
    a = load_prices(write(tmp_path, json.dumps(doc), "p.json"))
    b = load_prices(write(tmp_path, "discounts:\n  - {region: us-east-1, percent: 5}\nreserved:\n"
                                    "  - {instance_type: p4d.24xlarge, count: 1}\n", "p.yml"))
    assert a.doc == b.doc


@pytest.mark.parametrize("text, name, words", [
    ("discounts:\n  - {family: g5, percent: 100}\n", "p.yaml", "discounts.#1.percent"),
    ("discounts:\n  - {famly: g5, percent: 10}\n", "p.yaml", "famly"),
    ("overrides:\n  - {instance_type: g5.xlarge, usd_per_hour: -1}\n", "p.yaml", "usd_per_hour"),
    ("overrides:\n  - {usd_per_hour: 1}\n", "p.yaml", "instance_type"),
    ("reserved:\n  - {instance_type: g5.xlarge, count: 0}\n", "p.yaml", "count"),
    ("reserved:\n  - {instance_type: g5.xlarge, count: 1.5}\n", "p.yaml", "count"),
    ("discounts: [\n", "p.yaml", "not valid YAML"),
    ('{"discounts": [}', "p.json", "not valid JSON"),
    ("- 1\n", "p.yaml", "expected a mapping"),
    ("discounts: []\n", "p.txt", ".yaml, .yml or .json"),
    ('{"discounts": [{"percent": NaN}]}', "p.json", "percent"),
])
def test_a_bad_price_file_is_one_line_that_names_the_field(tmp_path, text, name, words):
    with pytest.raises(AdvisorError) as e:
        load_prices(write(tmp_path, text, name))
    assert words in str(e.value) and "\n" not in str(e.value)


def test_a_name_the_catalog_does_not_have_is_a_typo(tmp_path, snapshot):
    for text, words in (("discounts:\n  - {family: g55, percent: 10}\n", "family 'g55'"),
                        ("overrides:\n  - {instance_type: g5.xlarg, usd_per_hour: 1}\n", "instance_type 'g5.xlarg'"),
                        ("reserved:\n  - {instance_type: g5.xlarge, region: us-east-7, count: 1}\n", "region 'us-east-7'")):
        with pytest.raises(AdvisorError, match=words):
            load_prices(write(tmp_path, text)).check(snapshot)


def test_reserved_instances_cost_nothing_up_to_their_count_then_list():
    types = rk.TypeTable(names=["a"], samples_per_sec=np.array([100.0]), low=np.array([90.0]), high=np.array([110.0]),
                         source=np.array([2]), step_s=np.array([1.28]), intra_s=np.zeros(1), inter_unit_s=np.zeros(1))
    offers = rk.OfferTable(type_idx=np.array([0]), region_idx=np.zeros(1, dtype=int), market=np.array([rk.ON_DEMAND]),
                           price=np.array([2.0]), od_price=np.array([np.nan]), rate_mid=np.zeros(1),
                           rate_high=np.zeros(1), free=np.array([2]))
    for confidence in (0.0, 0.9):
        job = rk.Job(samples=3.6e6, budget_usd=1e6, deadline_hours=1e3, loss_hours=0.1, max_instances=4,
                     setup_hours=0.5, confidence=confidence)
        c = rk.evaluate(types, offers, job)
        assert c.billed.tolist() == [0, 0, 1, 2]
        assert c.cost[:2].tolist() == [0.0, 0.0] and c.cost_q[:2].tolist() == [0.0, 0.0]
        assert c.cost[2] == pytest.approx(2.0 * c.hours[2]) and c.cost[3] == pytest.approx(2 * 2.0 * c.hours[3])
        assert c.cost_q[3] == pytest.approx(2 * 2.0 * c.hours_q[3])


def test_every_cost_column_the_summary_and_the_probe_plan_use_the_file(cli, tmp_path, snapshot):
    path = write(tmp_path, """
discounts:
  - {family: g5, percent: 30}
reserved:
  - {instance_type: g4dn.xlarge, region: us-east-1, count: 1}
""")
    code, out, err = cli(*JOB, "--prices", path, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["prices"] == f"prices from {path} (1 discounts, 0 overrides, 1 reserved)"
    rows = doc["recommendations"]
    g5 = next(r for r in rows if r["instance_type"].startswith("g5.") and r["count"] == 1)
    assert g5["usd_per_hour"] == pytest.approx(0.7 * list_price(snapshot, g5["instance_type"], g5["region"]))
    assert g5["cost_usd"] == pytest.approx(g5["usd_per_hour"] * g5["hours"])
    # One g4dn.xlarge in us-east-1 is paid for: two cost what one does at list price.
    code, out, _ = cli(*JOB, "--prices", path, "--family", "g4dn", "--region", "us-east-1", "--top", "50",
                       "--format", "json", "--budget", "100000", "--deadline", "30d")
    rows = json.loads(out)["recommendations"]
    by_k = {r["count"]: r for r in rows if r["instance_type"] == "g4dn.xlarge"}
    od = list_price(snapshot, "g4dn.xlarge", "us-east-1")
    assert by_k[1]["cost_usd"] == 0 and by_k[1]["samples_per_dollar"] is None
    assert by_k[2]["cost_usd"] == pytest.approx(od * by_k[2]["hours"])
    # The probe plan: a probe on capacity already paid for costs nothing.
    probes = {p["instance_type"]: p for p in json.loads(out)["probe_next"]}
    if "g4dn.xlarge" in probes:
        assert probes["g4dn.xlarge"]["probe_cost_usd"] == 0
    code, out, _ = cli(*JOB, "--prices", path)
    assert out.splitlines()[0].endswith(f"prices from {path} (1 discounts, 0 overrides, 1 reserved)")
    code, out, _ = cli(*JOB)
    assert out.splitlines()[0].endswith("; list prices")


def test_the_probe_offer_of_a_reserved_type_is_free():
    from advisor.recommend.probeplan.inputs import probe_offers

    offers = rk.OfferTable(type_idx=np.array([0, 0]), region_idx=np.array([0, 1]),
                           market=np.array([rk.ON_DEMAND, rk.ON_DEMAND]), price=np.array([1.0, 0.5]),
                           od_price=np.full(2, np.nan), rate_mid=np.zeros(2), rate_high=np.zeros(2), free=np.array([1, 0]))
    types = rk.TypeTable(names=["g4dn.xlarge"], samples_per_sec=np.array([500.0]), low=np.array([300.0]),
                         high=np.array([700.0]), source=np.array([2]), step_s=np.array([0.2]), intra_s=np.zeros(1),
                         inter_unit_s=np.zeros(1))
    snap = load(SNAPSHOT_PATH)
    (where,) = probe_offers(types, offers, [snap.instance_types["g4dn.xlarge"]])
    assert where.offer == 0 and where.usd == 0


def test_a_bad_price_file_from_the_cli_is_exit_2_before_anything_prints(cli, tmp_path):
    # A bad number is refused before the catalog is read; a name, once the catalog says it has none
    # (after its age warning, if any).
    code, out, err = cli(*JOB, "--prices", write(tmp_path, "discounts:\n  - {percent: 101}\n"))
    assert code == 2 and out == "" and err.count("\n") == 1 and "price file" in err and "Traceback" not in err
    code, out, err = cli(*JOB, "--prices", write(tmp_path, "discounts:\n  - {family: g55, percent: 10}\n"))
    assert code == 2 and out == "" and "family 'g55'" in err.splitlines()[-1] and "Traceback" not in err
    code, out, err = cli(*JOB, "--prices", str(tmp_path / "missing.yaml"))
    assert code == 2 and "does not exist" in err


def test_a_key_a_rule_does_not_take_is_named_without_the_reason_of_the_key_it_is_elsewhere(tmp_path):
    """`count` belongs to reserved: on a discount it is an unknown key, not a bad count (safeio's first_error)."""
    path = write(tmp_path, "discounts:\n  - {family: g5, percent: 10, count: 2}\n", "p.yaml")
    with pytest.raises(AdvisorError) as e:
        load_prices(path)
    assert str(e.value) == f"price file {path}: discounts.#1.count: Extra inputs are not permitted"

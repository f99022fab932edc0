"""The shipped catalog snapshot and reference dataset, loaded once per test module."""

import pytest

from advisor.estimate.references import load_references
from catalog.io import SNAPSHOT_PATH, load


@pytest.fixture(scope="module")
def snapshot():
    return load(SNAPSHOT_PATH)


@pytest.fixture(scope="module")
def refs():
    return load_references()

"""conftest.SLOW_FIRST names tests that exist (a renamed test would silently lose its place)."""
import os
import re

from .conftest import SLOW_FIRST

ROOT = os.path.join(os.path.dirname(__file__), "..")


def test_every_listed_test_exists_once():
    assert len(set(SLOW_FIRST)) == len(SLOW_FIRST)
    for nodeid in SLOW_FIRST:
        path, name = nodeid.split("::")
        with open(os.path.join(ROOT, path)) as f:
            assert re.search(rf"^def {name}\(", f.read(), re.M), nodeid

"""The docstring examples of the simulator and the mock backend run and stay true."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "elastic.simulator.engine",
    "elastic.simulator.cluster",
    "elastic.simulator.conservative",
    "elastic.simulator.metrics",
    "elastic.simulator.speculative",
    "elastic.backends.mock",
    "elastic.cli.simulate",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0

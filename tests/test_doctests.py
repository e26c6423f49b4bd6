"""Every docstring example in the packages runs and stays true (modules found by their ``>>>``)."""

from __future__ import annotations

import doctest
import importlib

import pytest

from tests.source_tree import source_modules


def _modules_with_examples() -> list[str]:
    return [name for name, path in source_modules().items() if ">>>" in path.read_text(encoding="utf-8")]


MODULES = _modules_with_examples()


def test_examples_are_found():
    assert "elastic.simulator.engine" in MODULES
    assert len(MODULES) >= 20


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0

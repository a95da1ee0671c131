"""The public API: every name in each package's __all__ exists, and every
public function and class there has a docstring."""

from __future__ import annotations

import importlib

import pytest

from docgen.public import PUBLIC, undocumented


@pytest.mark.parametrize("package", PUBLIC)
def test_exports_exist_and_are_documented(package: str) -> None:
    module = importlib.import_module(package)
    assert undocumented(package) == []  # getattr on each name raises if an export is missing
    assert sorted(module.__all__) == sorted(set(module.__all__))

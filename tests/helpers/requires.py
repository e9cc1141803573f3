"""A test dependency that is missing fails the test naming it: a skip would hide it, and with it the tests."""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest


def require(module: str) -> ModuleType:
    """`module`, imported; a failure naming the install step when it is missing."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        hint = ("`make test` installs it after `make krb5` (MIT Kerberos' headers)" if module == "gssapi"
                else "`make test` installs it (pyproject.toml's test extra)")
        pytest.fail(f"the test needs the {module} package: {hint}: {e}", pytrace=False)

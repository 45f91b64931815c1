"""Load on first use: the one mechanism behind every lazy name in calibrate (docs/architecture.md, "Layers").

A package states its public API as `name → module` and gets its module `__getattr__` from
`api_getattr` (PEP 562): naming one function imports that function's module only, so
`from calibrate.calibration import Options` does not load pandas and SciPy. A command module
names the domain modules it calls with `module`, executed on its first attribute access, so
`calibrate report --help` shows its options without loading what the report needs. Both
import through `importlib` the way an ordinary import would (sys.modules, the parent's
attribute). Standard library only: the low floors import this.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any


def module(name: str) -> ModuleType:
    """Return module `name`, executed on its first attribute access rather than now."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    found = importlib.util.module_from_spec(spec)
    sys.modules[name] = found
    loader.exec_module(found)
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, found)  # as an ordinary import does
    return found


def api_getattr(package: str, api: dict[str, str]) -> Callable[[str], Any]:
    """Return a package's `__getattr__` that imports a public name's module on first use (PEP 562).

    `api` maps each name to its module: relative to the package ("report") or absolute
    ("calibrate.gold") for a name the package re-exports from a lower floor.
    """
    def __getattr__(name: str) -> Any:
        where = api.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where if "." in where else f"{package}.{where}"), name)
        setattr(sys.modules[package], name, value)  # the next use is an ordinary attribute
        return value

    return __getattr__

"""Support for the top-level API (:mod:`optsched`): modules named after their main function.

``optsched.evaluate`` and ``optsched.compare`` are both modules (``evaluate.py``,
``compare.py``) and the API's functions. Python binds a package attribute to a submodule as
soon as the submodule is imported, so a plain re-export of the function would be replaced by
the module depending on import order. Instead these modules are made callable: calling the
module calls its function of the same name, looked up at call time (so ``mock.patch`` of
``optsched.evaluate.evaluate`` is honoured), and ``import optsched.evaluate as E`` still gives
the module.
"""

from __future__ import annotations

import sys
import types
from typing import Any


class CallableModule(types.ModuleType):
    """A module whose call is a call of its function named like the module's last part."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return getattr(self, self.__name__.rpartition(".")[2])(*args, **kwargs)


def make_callable(module_name: str) -> None:
    """Make the (imported or importing) module ``module_name`` a :class:`CallableModule`."""
    sys.modules[module_name].__class__ = CallableModule

"""Load a numba kernel's cached machine code without numba's whole-target start-up.

A ``cache=True`` kernel's first call in a process goes through numba's
``FunctionCache.load_overload``, which first runs ``CPUContext.refresh()``: it imports and
installs every typing and lowering registry numba has (linear algebra, random generators,
typed dicts, jitclass, ...; ~0.26 s CPU on the bench machine), which only *compiling*
needs. Loading machine code that is already on disk needs the runtime (NRT), the code
library and the environments it references (``caching._CacheImpl.rebuild``), not the
registries. :func:`call` does that load itself on a kernel's first call and then calls the
kernel as usual; when anything is missing or different (no cache entry, a stale one, a
numba whose internals moved) it does nothing and numba's own path runs (refreshing and, if
need be, compiling), so the result never depends on which path loaded the code.

It uses numba internals (``Dispatcher._cache``,
``_load_overload``), pinned by the lock file (numba 0.68.1); ``tests/policies/test_fast.py``
checks that the load happens without the refresh and that a missing cache falls back.
"""

from __future__ import annotations

from typing import Any

#: kernels loaded by :func:`call` without a refresh (by ``py_func.__qualname__``), for tests
LOADED: list[str] = []


def _load_without_refresh(disp: Any, args: tuple[Any, ...]) -> bool:
    """Add the on-disk overload of ``disp`` for ``args``' types; False when there is none
    (or numba's internals are not the expected ones)."""
    try:
        from numba.core.compiler_lock import global_compiler_lock
        from numba.core.runtime import rtsys

        ctx = disp.targetctx
        sig = tuple(disp.typeof_pyval(a) for a in args)
        with global_compiler_lock:
            if disp.overloads.get(sig) is not None:
                return True
            rtsys.initialize(ctx)  # the runtime (allocation) the compiled code calls into
            cres = disp._cache._load_overload(sig, ctx)  # no refresh: the cache only
            if cres is None:
                return False
            ctx.insert_user_function(cres.entry_point, cres.fndesc, [cres.library])
            disp.add_overload(cres)
    except Exception:  # noqa: BLE001 - any surprise: numba's own path decides
        return False
    LOADED.append(disp.py_func.__qualname__)
    return True


def call(disp: Any, *args: Any) -> Any:
    """``disp(*args)`` for a numba dispatcher ``disp``, its cached code loaded without the
    registry refresh on the first call; a plain Python function (numba missing) is called
    as it is."""
    if getattr(disp, "_cache", None) is not None and not disp.overloads:
        _load_without_refresh(disp, args)
    return disp(*args)


__all__ = ["call", "LOADED"]

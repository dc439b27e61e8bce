"""Plug-ins: the one way policies, formulations, bound methods and backends are found, and
the one parameter-spec type they declare their knobs with.

A :class:`Registry` holds the named entries of one kind of plug-in. Its entries come from

1. **built-in modules**: every public module (and sub-package) of the registry's packages is
   imported on first use, and importing a module registers what it defines -- adding a
   plug-in is adding one file, no list to edit;
2. **installed distributions**: the entry-point group ``optsched.<kind>`` (``optsched.policies``,
   ``optsched.formulations``, ``optsched.bounds``, ``optsched.backends``); an entry point names
   a module (importing it registers its entries) or an object (registered under the entry
   point's name);
3. **a reference given where a name is expected**: ``path/to/file.py:Name`` or
   ``package.module:Name`` (``optsched compare --policies my_policy.py:MyPolicy``), loaded on
   demand, so a researcher can hold their own scheduler against the optimum without forking.

:class:`ParamSpec` is a parameter (name, type, default, validation, help). The same spec
parses a ``--param key=value`` string from the command line and checks a typed value given
from Python, and ``optsched policies`` / ``optsched formulations`` list it.
"""

from __future__ import annotations

import builtins
import hashlib
import importlib
import importlib.util
import inspect
import math
import numbers
import pkgutil
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Generic, TypeVar

from .errors import OptschedError


class PluginError(OptschedError, ValueError):
    """An unknown plug-in name, an unloadable ``module:Name`` reference or a bad parameter."""


# ----------------------------------------------------------------------------- parameters
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
_TYPE_WORDS = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}


@dataclass(frozen=True)
class ParamSpec:
    """One parameter of a plug-in.

    ``type`` is ``int``, ``float``, ``bool`` or ``str``; ``default`` is used when the parameter
    is not given (``None`` makes it optional: ``None`` stays ``None``). ``lo``/``hi`` bound a
    number, ``choices`` a string; ``check`` returns an error text for a bad value (or None),
    e.g. :func:`positive`. Strings (the command line's ``--param key=value``) are converted to
    ``type``; typed values (the Python API) are checked the same way.
    """

    name: str
    type: builtins.type
    default: Any = None
    help: str = ""
    check: Callable[[Any], str | None] | None = None
    lo: float | None = None
    hi: float | None = None
    choices: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.type not in _TYPE_WORDS:
            raise TypeError(f"parameter {self.name!r}: type must be int, float, bool or str")
        if not self.name.isidentifier():
            raise ValueError(f"parameter name {self.name!r} is not an identifier")

    def requirement(self) -> str:
        """What a valid value is, in words ("an integer in 1..100000")."""
        word = _TYPE_WORDS[self.type]
        if self.choices:
            return "one of " + ", ".join(self.choices)
        if self.lo is not None and self.hi is not None:
            return f"{word} in {_num_text(self.lo)}..{_num_text(self.hi)}"
        if self.lo is not None:
            return f"{word} >= {_num_text(self.lo)}"
        if self.hi is not None:
            return f"{word} <= {_num_text(self.hi)}"
        return word

    def parse(self, value: Any, owner: str = "",
              error: builtins.type[Exception] = PluginError) -> Any:
        """``value`` converted to ``type`` and checked; raises ``error`` naming ``owner``
        (e.g. ``"policy 'vllm'"``), the parameter and the value."""
        if value is None:
            if self.default is None:
                return None
            raise error(f"{_prefix(owner)}{self.name} needs a value")
        converted = self._convert(value)
        if converted is _BAD:
            raise error(f"{_prefix(owner)}{self.name} must be {self._type_requirement(value)}, "
                        f"got {value!r}")
        problem = self._problem(converted)
        if problem:
            raise error(f"{_prefix(owner)}{self.name} {problem}, got {value!r}")
        return converted

    def _type_requirement(self, value: Any) -> str:
        # text that is no number at all: say only what the type is; a number of the wrong
        # kind (2.5 for an integer): say the whole requirement
        if self.type in (int, float) and isinstance(value, str) and _as_float(value) is None:
            return _TYPE_WORDS[self.type]
        return self.requirement()

    def _convert(self, value: Any) -> Any:
        t = self.type
        if isinstance(value, str) and t is not str:
            text = value.strip().lower()
            if t is bool:
                return True if text in _TRUE else False if text in _FALSE else _BAD
            if t is int:
                try:
                    return int(text)
                except ValueError:
                    return _BAD
            f = _as_float(text)
            return _BAD if f is None else f
        if t is bool:
            return bool(value) if _is_bool(value) else _BAD
        if _is_bool(value):
            return _BAD
        if t is int:
            return int(value) if _is_int(value) else _BAD
        if t is float:
            return float(value) if _is_int(value) or _is_real(value) else _BAD
        return value if isinstance(value, str) else _BAD

    def _problem(self, v: Any) -> str | None:
        if self.type is float and not math.isfinite(v):
            return f"must be {self.requirement()}"
        if self.choices and v not in self.choices:
            return f"must be {self.requirement()}"
        if (self.lo is not None and v < self.lo) or (self.hi is not None and v > self.hi):
            return f"must be {self.requirement()}"
        if self.check is not None:
            return self.check(v)
        return None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form listed by ``optsched policies --json`` and ``optsched formulations``."""
        return {"name": self.name, "type": self.type.__name__, "default": self.default,
                "help": self.help, "requirement": self.requirement()}


_BAD = object()


def _prefix(owner: str) -> str:
    return f"{owner}: " if owner else ""


def _num_text(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _as_float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _is_bool(v: Any) -> bool:
    return isinstance(v, bool) or type(v).__name__ == "bool_"  # numpy.bool_


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not _is_bool(v)


def _is_real(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not _is_bool(v)


def parse_params(specs: Sequence[ParamSpec], given: Mapping[str, Any], owner: str,
                 error: type[Exception] = PluginError,
                 defaults: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``given`` checked against ``specs``: every declared parameter, with its default where
    not given (``defaults`` overrides the specs' own); an unknown key raises ``error``."""
    known = {p.name: p for p in specs}
    unknown = [k for k in given if k not in known]
    if unknown:
        names = ", ".join(sorted(known)) or "none"
        raise error(f"{_prefix(owner)}unknown parameter {unknown[0]!r} (known: {names})")
    out = {p.name: p.default for p in specs}
    out.update(defaults or {})
    for key, value in given.items():
        out[key] = known[key].parse(value, owner, error)
    return out


def parse_assignments(items: Iterable[str] | None, option: str = "--param",
                      error: type[Exception] = PluginError) -> dict[str, str]:
    """``["key=value", ...]`` (the command line's ``--param``) -> ``{key: value}``; values stay
    strings, converted later by the plug-in's :class:`ParamSpec` s."""
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise error(f"{option} {item!r}: expected key=value")
        out[key.strip()] = value
    return out


# common checks for ParamSpec.check
def positive(v: float) -> str | None:
    return None if v > 0 else "must be > 0"


def non_negative(v: float) -> str | None:
    return None if v >= 0 else "must be >= 0"


def unit_interval(v: float) -> str | None:
    return None if 0 <= v <= 1 else "must be in [0, 1]"


def open_unit_interval(v: float) -> str | None:
    return None if 0 < v <= 1 else "must be in (0, 1]"


# ------------------------------------------------------------------------- loading objects
def is_reference(text: str) -> bool:
    """True if ``text`` is a ``file.py:Name`` / ``package.module:Name`` reference, not a name."""
    target, sep, attr = text.rpartition(":")
    return bool(sep and target and attr.isidentifier())


def load_object(reference: str, error: type[Exception] = PluginError) -> Any:
    """The object ``Name`` of ``path/to/file.py:Name`` or ``package.module:Name``."""
    target, sep, attr = reference.rpartition(":")
    if not sep or not target or not attr.isidentifier():
        raise error(f"{reference!r}: expected path/to/file.py:Name or package.module:Name")
    if target.endswith(".py") or "/" in target or "\\" in target:
        module = _load_file(Path(target), reference, error)
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as e:
            raise error(f"{reference}: cannot import {target!r} ({e})") from None
    if not hasattr(module, attr):
        raise error(f"{reference}: {target} defines no {attr!r}")
    return getattr(module, attr)


def _load_file(path: Path, reference: str, error: type[Exception]) -> ModuleType:
    if not path.is_file():
        raise error(f"{reference}: no such file {str(path)!r}")
    resolved = path.resolve()
    name = "optsched_user_" + hashlib.sha1(str(resolved).encode()).hexdigest()[:12]
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise error(f"{reference}: {str(path)!r} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        del sys.modules[name]
        raise error(f"{reference}: importing {str(path)!r} failed: {type(e).__name__}: {e}") from None
    return module


# -------------------------------------------------------------------------------- registry
E = TypeVar("E")


class Registry(Generic[E]):
    """Named entries of one kind of plug-in (``kind`` is the word used in messages).

    ``packages``: packages whose public modules are imported on first use (``base`` and
    ``_private`` modules are skipped); ``modules``: further modules to import; ``group``: the
    entry-point group; ``adapt(label, obj)`` turns a loaded object (a class from
    ``file.py:Name`` or an entry point) into an entry, or raises ``error``.
    """

    def __init__(self, kind: str, *, packages: Sequence[str] = (), modules: Sequence[str] = (),
                 group: str | None = None, error: type[Exception] = PluginError,
                 adapt: Callable[[str, Any], E] | None = None, skip: Sequence[str] = ("base",),
                 plural: str | None = None):
        self.kind = kind
        self.plural = plural or kind + "s"
        self.packages = tuple(packages)
        self.modules = tuple(modules)
        self.group = group
        self.error = error
        self._adapt = adapt
        self._skip = frozenset(skip)
        self._entries: dict[str, E] = {}
        self._by_object: dict[int, E] = {}
        self._references: dict[str, E] = {}
        self._discovered = False
        self._discovering = False
        self._builtins_loaded = False

    # -- registering
    def add(self, name: str, entry: E, obj: Any = None) -> E:
        """Register ``entry`` as ``name`` (``obj``: the class/function it was made from, so a
        ``module:Name`` reference to it finds this entry)."""
        old = self._entries.get(name)
        if old is not None and old is not entry and old != entry:
            raise self.error(f"two {self.plural} are registered as {name!r}")
        self._entries[name] = entry
        if obj is not None:
            self._by_object[id(obj)] = entry
        return entry

    def remove(self, name: str) -> None:
        """Forget ``name`` (tests registering a throw-away plug-in clean up with this)."""
        entry = self._entries.pop(name, None)
        if entry is not None:
            self._by_object = {k: v for k, v in self._by_object.items() if v is not entry}

    def register(self, name: str | None = None) -> Callable[[Any], Any]:
        """Decorator registering the decorated object itself, under ``name`` or its ``name``
        attribute."""

        def deco(obj: Any) -> Any:
            self.add(name or obj.name, obj, obj)
            return obj

        return deco

    # -- finding
    def discover(self) -> None:
        """Import the built-in modules and the installed entry points (once)."""
        if self._discovered or self._discovering:
            return
        self._discovering = True
        try:
            self._load_builtins()
            if self.group:
                self._load_entry_points()
            self._discovered = True
        finally:
            self._discovering = False

    def _load_builtins(self) -> None:
        """Import the built-in packages and modules (once): their entries win over entry
        points of the same name (:meth:`_load_entry_points`)."""
        if self._builtins_loaded:
            return
        outer = self._discovering
        self._discovering = True  # a module looking an entry up while imported: no re-entry
        try:
            for package in self.packages:
                self._import_package(package)
            for module in self.modules:
                importlib.import_module(module)
            self._builtins_loaded = True
        finally:
            self._discovering = outer

    def _import_package(self, package: str) -> None:
        try:
            pkg = importlib.import_module(package)
        except ModuleNotFoundError as e:
            if e.name and package.startswith(e.name):  # an optional package not there (yet)
                return
            raise
        for mod in pkgutil.iter_modules(getattr(pkg, "__path__", [])):
            if not mod.name.startswith("_") and mod.name not in self._skip:
                importlib.import_module(f"{package}.{mod.name}")

    def _load_entry_points(self) -> None:
        from importlib import metadata  # lazy: importing it costs ~0.1 s (email.*) per CLI run

        assert self.group is not None
        for ep in metadata.entry_points(group=self.group):
            try:
                obj = ep.load()
                if not isinstance(obj, ModuleType) and ep.name not in self._entries:
                    self.add(ep.name, self._from_object(ep.name, obj), obj)
            except Exception as e:  # a broken third-party plug-in must not break the others
                warnings.warn(f"{self.kind} plug-in {ep.name!r} ({ep.value}) not loaded: "
                              f"{type(e).__name__}: {e}", stacklevel=2)

    def _from_object(self, label: str, obj: Any) -> E:
        known = self._by_object.get(id(obj))
        if known is not None:
            return known
        if self._adapt is None:
            return obj
        return self._adapt(label, obj)

    def get(self, name: str) -> E:
        """The entry registered as ``name``, or loaded from a ``module:Name`` reference.
        A built-in name is answered without reading the installed entry points (a built-in
        entry wins over an entry point of its name anyway): a CLI run saves importing
        ``importlib.metadata``."""
        if not self._discovering:
            self._load_builtins()
        if name not in self._entries:
            self.discover()
        if name in self._entries:
            return self._entries[name]
        if is_reference(name):
            if name not in self._references:
                obj = load_object(name, self.error)
                self._references[name] = self._from_object(name, obj)
            return self._references[name]
        known = ", ".join(self.names()) or "none"
        raise self.error(f"unknown {self.kind} {name!r}; known {self.plural}: {known}")

    def __getitem__(self, name: str) -> E:
        """``registry[name]``: :meth:`get`."""
        return self.get(name)

    def __contains__(self, name: object) -> bool:
        self.discover()
        return name in self._entries

    def names(self) -> list[str]:
        """Registered names, sorted."""
        self.discover()
        return sorted(self._entries)

    def entries(self) -> list[E]:
        """Registered entries, sorted by name."""
        return [self._entries[k] for k in self.names()]

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())


def describe_object(obj: Any) -> str:
    """The first line of ``obj``'s docstring (a loaded plug-in's description)."""
    doc = inspect.getdoc(obj) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


#: bound methods (lower bounds on the optimum): modules of ``optsched.bounds`` register here
BOUNDS: Registry[Any] = Registry("bound method", packages=("optsched.bounds",),
                                 group="optsched.bounds")

__all__ = [
    "BOUNDS", "ParamSpec", "PluginError", "Registry", "describe_object", "is_reference",
    "load_object", "non_negative", "open_unit_interval", "parse_assignments", "parse_params",
    "positive", "unit_interval",
]

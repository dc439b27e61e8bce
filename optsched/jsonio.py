"""Strict reading of the JSON input files (instances, schedules): one parser for all of them.

docs/semantics.md section 2 says loading refuses what it cannot read unambiguously, with one
line naming the culprit. Python's :func:`json.loads` is lenient in four ways this refuses:

* a **duplicate key** (``{"M": 8, "M": 9}``) keeps the last value: refused, naming the key;
* ``NaN``, ``Infinity`` and ``-Infinity`` become floats: they are parsed into a
  :class:`NonFinite` marker instead, which no field accepts, so the field's own check names
  the field ("field 'arrival' must be a finite number ..., got NaN");
* nesting deeper than Python's recursion limit raises :class:`RecursionError`: refused;
* an empty file is "Expecting value: line 1 column 1": refused as an empty file.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["NonFinite", "loads"]


class NonFinite:
    """What ``NaN``/``Infinity``/``-Infinity`` in an input file parse to: not a number, so
    every numeric field refuses it, and its ``repr`` is the constant as written."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _pairs(error: type[Exception], what: str):
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in pairs:
            if k in out:
                raise error(f"{what}: duplicate key {k!r} in one JSON object")
            out[k] = v
        return out

    return hook


def loads(text: str, error: type[Exception], what: str) -> Any:
    """``text`` parsed as JSON, strictly (module docstring); every problem raises
    ``error(f"{what}: ...")`` in one line."""
    if not text.strip():
        raise error(f"{what}: empty file (expected a JSON object)")
    try:
        return json.loads(text, object_pairs_hook=_pairs(error, what), parse_constant=NonFinite)
    except json.JSONDecodeError as e:
        raise error(f"{what}: malformed JSON: {e}") from None
    except RecursionError:
        raise error(f"{what}: JSON nested too deeply to be an optsched file") from None


def finite_or_none(v: Any) -> float | None:
    """A number as the JSON contracts report it: a float, or None (``null``) when missing or
    not finite (NaN, +-inf). The one ``_num`` of compare, solve and sweep rows."""
    if v is None:
        return None
    v = float(v)
    return v if math.isfinite(v) else None

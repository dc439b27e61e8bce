"""Instances shipped inside the package (so optsched runs without ``shared/data``)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from ..errors import InputFileError
from ..instance import Instance


def embedded_instance_names() -> list[str]:
    root = resources.files(__name__)
    return sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".json"))


def embedded_instance_path(name: str) -> Path | None:
    """Path of the shipped instance ``name`` (with or without ``.json``), or None."""
    stem = name[:-5] if name.endswith(".json") else name
    p = resources.files(__name__) / f"{stem}.json"
    return Path(str(p)) if p.is_file() else None


def load_instance(source: str | Path):
    """An instance file, or, when no file ``source`` exists, the instance shipped under that
    name (``demo``, ``tiny``; with or without ``.json``) -- what the CLI's ``INSTANCE``
    argument means. Raises :class:`~optsched.errors.InputFileError` naming ``source`` when it
    is neither."""

    p = Path(source)
    if not p.exists():
        shipped = embedded_instance_path(str(source))
        if shipped is None:
            raise InputFileError(f"{source}: no such instance file (nor a shipped instance of that name)")
        p = shipped
    return Instance.load(p)


def load_embedded(name: str):
    p = embedded_instance_path(name)
    if p is None:
        raise KeyError(f"no shipped instance {name!r}; have {', '.join(embedded_instance_names())}")
    return Instance.load(p)

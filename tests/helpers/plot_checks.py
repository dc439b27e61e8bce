"""Checks of drawn figures: real PNG files, the rectangles of a Gantt chart."""

from __future__ import annotations

PNG = b"\x89PNG\r\n\x1a\n"


def png_ok(path, min_bytes=5_000):
    data = path.read_bytes()
    assert data[:8] == PNG
    assert len(data) >= min_bytes


def collections_of(ax):
    return {c.get_gid(): c for c in ax.collections if c.get_gid()}


def boxes(coll):
    """(x0, x1, y_center) of each rectangle of a PolyCollection, sorted."""
    out = []
    for p in coll.get_paths():
        v = p.vertices[:4]
        out.append((v[:, 0].min(), v[:, 0].max(), v[:, 1].mean()))
    return sorted(out)

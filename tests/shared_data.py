"""Where the tests find ``../shared/data`` (traces, profiling): ``OPTSCHED_DATA`` if set (a
worktree without ``../shared`` beside it), else ``../shared/data`` next to the repository, the
same rule as ``notebooks/nbsetup.py``. Tests that need it skip with the path in the reason."""

from __future__ import annotations

import os
from pathlib import Path

SHARED_DATA = Path(os.environ.get("OPTSCHED_DATA",
                                  Path(__file__).resolve().parents[1].parent / "shared" / "data"))

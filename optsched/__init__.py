"""optsched: provably optimal schedules for LLM inference serving.

See ``docs/semantics.md`` for what a schedule means; every schedule goes
through :func:`optsched.evaluate.evaluate`.
"""

__version__ = "0.1.0"

"""Error types. Bad input raises one of these with a message naming the culprit."""


class OptschedError(Exception):
    """Base class of every error optsched raises on purpose."""


class InstanceError(OptschedError, ValueError):
    """An instance (or one of its requests, limits, cost model) is invalid."""


class ScheduleFormatError(OptschedError, ValueError):
    """A schedule file or object is malformed (not: infeasible; that is a Violation)."""


class InputFileError(OptschedError):
    """A file could not be read or parsed."""

"""optsched's speed instruments (``benchmarks/README.md``): run them all with ``make bench``
(``python -m benchmarks``), one with ``python -m benchmarks.<name>``, from the repository root."""

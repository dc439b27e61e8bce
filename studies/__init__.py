"""The studies behind ``docs/results/`` (``studies/README.md``): one folder per results page, each
with its scripts, their recorded outputs (``results/``) and a README naming the page it feeds.
Run a study from the repository root: ``python -m studies.<page>.<script>``."""

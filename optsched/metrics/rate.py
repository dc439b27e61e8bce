"""The rate search's metrics (:mod:`optsched.serving.rate_search`, ``optsched capacity
--metric``), registered in :data:`optsched.metrics.registry.METRICS`: EcoServe's normalised
latency and JCT SLO attainment (section 4), the mean JCT, and Apt-Serve's TTFT / TBT
attainment (its effective throughput: every gap within the TBT SLO; the per-request P99
reading kept for comparison), each read off the run's serving metrics
(:func:`optsched.metrics.serving.serving_metrics`)."""

from __future__ import annotations

from .registry import MetricRun, register_metric


@register_metric("normalized-latency", "mean of JCT / output length (EcoServe section 4)",
                 "lower")
def _normalized_latency(run: MetricRun):
    return run.metrics()["normalized_latency"]


@register_metric("mean-jct", "mean job completion time", "lower")
def _mean_jct(run: MetricRun):
    return run.metrics()["mean_jct"]


@register_metric("slo-attainment", "share of requests meeting the JCT SLO scale * (t_p + "
                 "t_g * l_g) (EcoServe section 4)", "higher", needs=("slo",))
def _slo_attainment(run: MetricRun):
    return run.metrics()["slo_attainment"]


@register_metric("ttft-tbt-attainment", "share of requests with TTFT <= --ttft-slo and every "
                 "gap between tokens (max TBT) <= --tbt-slo (Apt-Serve's effective throughput)",
                 "higher", needs=("ttft_slo", "tbt_slo"))
def _ttft_tbt(run: MetricRun):
    return run.metrics()["ttft_tbt_attainment"]


@register_metric("ttft-p99tbt-attainment", "as ttft-tbt-attainment with the per-request P99 "
                 "(nearest rank) of the gaps instead of the longest: the old reading, kept for "
                 "comparison; it lets a request with over 100 tokens have one gap of any "
                 "length", "higher", needs=("ttft_slo", "tbt_slo"))
def _ttft_p99tbt(run: MetricRun):
    return run.metrics()["ttft_p99tbt_attainment"]

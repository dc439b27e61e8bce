"""Synthetic ShareGPT / LMSYS-like lengths (optsched.workloads.chat_lengths, generator 'chat-like'):
the drawn lengths match the statistics the papers report."""

import math
import subprocess
import sys

import numpy as np
import pytest

from optsched.instance import Limits
from optsched.workloads.chat_lengths import CHAT_DATASETS, LengthSpec, chat_lengths
from optsched.workloads.generators import generate

#: the reported numbers (mean, std or None, lo, hi), copied from the papers' tables
#: (BROS Table 2; EcoServe Table 2), to check the module's table against
REPORTED = {
    "sharegpt": ((222.76, 256.36, 1, None), (234.51, 268.50, 1, None)),
    "lmsys": ((90.50, 148.52, 1, None), (237.04, 228.21, 1, None)),
    "sharegpt-ecoserve": ((161.31, None, 16, 3200), (337.99, None, 19, 991)),
}


@pytest.mark.parametrize("dataset", sorted(REPORTED))
def test_sample_matches_reported_mean_spread_and_range(dataset):
    P, O = chat_lengths(dataset, 40_000, np.random.default_rng(3))
    for x, (mean, std, lo, hi) in zip((P, O), REPORTED[dataset]):
        # 40,000 draws: the sample mean's standard error is std / 200 < 1% of the mean
        # (CV <= 1.7); 4% leaves room for rounding to integers
        assert x.mean() == pytest.approx(mean, rel=0.04)
        if std is not None:  # a heavy-tailed sample std converges slowly: 15%
            assert x.std() == pytest.approx(std, rel=0.15)
        assert x.min() >= lo and (hi is None or x.max() <= hi)


def test_truncated_mean_solves_to_the_reported_mean():
    spec = CHAT_DATASETS["sharegpt-ecoserve"][1]
    assert spec.truncated_mean(spec.location()) == pytest.approx(337.99, rel=1e-9)
    # untruncated, the log-normal mean is exp(mu + s^2 / 2): mu = ln(mean) - s^2 / 2
    s = LengthSpec(100.0, 50.0, "hand")
    assert s.location() == pytest.approx(math.log(100.0) - s.sigma ** 2 / 2, abs=1e-9)
    assert s.sigma == pytest.approx(math.sqrt(math.log(1.25)))


def test_generator_is_seeded_fits_memory_and_poisson():
    lim = Limits(kv_capacity=600, max_batch_tokens=4096, block_size=16)
    a = generate("chat-like", n=300, rate=5.0, seed=7, limits=lim)
    b = generate("chat-like", n=300, rate=5.0, seed=7, limits=lim)
    assert a.to_dict() == b.to_dict()
    assert (lim.kv_footprint(a.prompt + a.output - 1) <= 600).all()
    gaps = np.diff(np.array([r.arrival for r in a.requests]))
    assert a.requests[0].arrival == 0 and gaps.mean() == pytest.approx(0.2, rel=0.2)


def test_cli_unknown_dataset_is_one_line_exit_2(tmp_path):
    r = subprocess.run([sys.executable, "-m", "optsched", "generate", "chat-like", "--n", "3",
                        "--rate", "1", "--dataset", "wiki", "-o", str(tmp_path / "x.json")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "unknown dataset 'wiki'" in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1

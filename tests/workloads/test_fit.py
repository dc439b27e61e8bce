"""Cost-model fit (optsched.workloads.fit) on ../shared/data/profiling, compared with the InferMax preset."""

import csv

import numpy as np
import pytest
from paths import SHARED_DATA

from optsched.cost import PRESETS, RHO_FITTED, LinearCost
from optsched.errors import InputFileError
from optsched.workloads.fit import fit_attention, fit_linear_cost, nnls

PROF = SHARED_DATA / "profiling"
needs_data = pytest.mark.skipif(not PROF.is_dir(), reason=f"shared data not found at {PROF}")


def test_nnls_matches_lstsq_when_unconstrained_optimum_is_positive():
    rng = np.random.default_rng(0)
    A = rng.random((30, 3))
    x = np.array([1.0, 2.0, 0.5])
    assert np.allclose(nnls(A, A @ x), x)
    y = A @ np.array([1.0, -2.0, 0.5])
    z = nnls(A, y)
    assert z.min() >= 0 and z[1] == 0


@needs_data
def test_fit_llama2_7b_vs_infermax_reference(capsys):
    r = fit_linear_cost(PROF, "Llama-2-7b-hf", "a100", 1)
    ref = PRESETS["infermax-llama2-7b-a100"]
    assert isinstance(r.cost, LinearCost) and r.layers == 32
    with capsys.disabled():
        print("\ncoef   fit          InferMax ref")
        for k, v in r.cost.coefficients.items():
            print(f"{k:5s}  {v:.4e}   {ref.coefficients[k]:.4e}")
        for g in r.groups:
            print(f"{g.name:8s} rows={g.n_rows} rmse={g.rmse_ms:.4f} ms "
                  f"max_rel={g.max_rel_error:.3f} mean_rel={g.mean_rel_error:.3f}")
    # same order of magnitude as the InferMax authors' coefficients for the main terms
    for k in ("k0", "k1", "kpq", "kpm", "kdm", "kdr", "kpl", "kdb"):
        ratio = r.cost.coefficients[k] / ref.coefficients[k]
        assert 0.1 < ratio < 10, (k, ratio)
    # every tp = 1 row of the MLP table, and every attention row by its is_prefill flag
    with open(PROF / "mlp_a100_Llama-2-7b-hf.csv") as fh:
        mlp_rows = sum(r["num_tensor_parallel_workers"] == "1" for r in csv.DictReader(fh))
    with open(PROF / "attention_samples_a100_Llama-2-7b-hf.csv") as fh:
        rows = csv.DictReader(line for line in fh if not line.startswith("#"))
        flags = [r["is_prefill"].lower() for r in rows]
    assert len(flags) == 76  # the sample size the file's comment and the data README state
    assert {g.name: g.n_rows for g in r.groups} == {
        "mlp": mlp_rows, "decode": flags.count("false"), "prefill": flags.count("true")}
    for g in r.groups:
        assert g.mean_rel_error < 0.1 and g.max_rel_error < 0.5
    # a whole batch of 4096 prefill tokens, one request, empty cache: ~0.3 s like the preset
    t_fit = r.cost.batch_time([4096], [0], [False])
    t_ref = ref.batch_time([4096], [0], [False])
    assert t_fit == pytest.approx(t_ref, rel=0.25)


@needs_data
def test_absolute_weighting_and_tp():
    r = fit_linear_cost(PROF, weighting="absolute")
    assert r.group("mlp").rmse_ms < fit_linear_cost(PROF).group("mlp").rmse_ms
    r2 = fit_linear_cost(PROF, tp=2)
    assert r2.cost.k1 < r.cost.k1  # TP2 halves the per-token matmul time


@needs_data
def test_missing_attention_profile_is_named():
    with pytest.raises(InputFileError, match="no attention profile for Llama-2-70b-hf"):
        fit_linear_cost(PROF, "Llama-2-70b-hf")


def test_malformed_attention_file(tmp_path):
    p = tmp_path / "a.csv"
    p.write_text("is_prefill,batch_size,prefill_chunk_size,kv_cache_size,attn_decode_median_ms,"
                 "attn_prefill_median_ms\nFalse,1,0,32,0.009,\nTrue,1,96,0,,oops\n")
    with pytest.raises(InputFileError, match=r"a\.csv: line 3: column 'attn_prefill_median_ms'"):
        fit_attention(p)


@needs_data
def test_vidur_preset_is_the_fit_of_the_profiling_tables():
    """The shipped ``vidur-llama2-7b-a100`` preset is what studies/claims/cost_preset.py derives: a
    re-fit of the shared tables gives the same coefficients to the 6 digits pasted."""
    r = fit_linear_cost(PROF, "Llama-2-7b-hf", "a100", 1)
    shipped = PRESETS["vidur-llama2-7b-a100"]
    for k, v in r.cost.coefficients.items():
        assert shipped.coefficients[k] == pytest.approx(v, rel=1e-5, abs=1e-12), k
    assert shipped.rho == pytest.approx(r.cost.rho, rel=1e-3)


def test_vidur_preset_prices_small_decode_batches_above_infermax():
    """Hand check of the two presets on a decode batch of 8 entries with 1,000 cached tokens
    each (t = k0 + kdb + 8 (k1 + kdr) + kdm * 8,000):
    InferMax: 32e-3 * (0.06486 + 0.01921 + 8 (0.00191 + 0.00074) + 8.513e-6 * 8000) = 5.548 ms;
    fitted: 6.5436 + 0.260981 + 8 (0.0612856 + 0.0317814) + 0.280022e-3 * 8000 = 9.789 ms."""
    im, vd = PRESETS["infermax-llama2-7b-a100"], PRESETS["vidur-llama2-7b-a100"]
    assert 1000 * im.batch_time([1] * 8, [1000] * 8, [True] * 8) == pytest.approx(5.548, abs=1e-3)
    assert 1000 * vd.batch_time([1] * 8, [1000] * 8, [True] * 8) == pytest.approx(9.789, abs=1e-3)


@pytest.mark.skipif(not (SHARED_DATA / "profiling").is_dir(),
                    reason=f"needs {SHARED_DATA / 'profiling'}")
def test_rho_presets_are_the_profiling_fit():
    from optsched.workloads.fit import fit_rho

    d = SHARED_DATA / "profiling"
    for name, tp, key in (("mlp_a100_Llama-2-7b-hf.csv", 1, "llama2-7b-a100"),
                          ("mlp_a100_Llama-2-70b-hf.csv", 4, "llama2-70b-4xa100"),
                          ("mlp_a100_Meta-Llama-3-8B.csv", 1, "llama3-8b-a100")):
        assert fit_rho(d / name, tp).rho == pytest.approx(RHO_FITTED[key], rel=1e-3), name
    # a fitted cost model carries its own model's rho, not the default preset's
    from optsched.workloads.fit import fit_linear_cost

    fitted = fit_linear_cost(d, "Llama-2-7b-hf", "a100", 1).cost
    assert fitted.rho == pytest.approx(RHO_FITTED["llama2-7b-a100"], rel=1e-3)

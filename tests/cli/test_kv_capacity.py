"""``optsched kv-capacity``: the KV capacity from a model and a GPU, its options and errors."""

from __future__ import annotations

from cli_helpers import err_of, one_line_error


def test_kv_capacity_refuses_more_kv_heads_than_heads(capsys):
    one_line_error(capsys, "kv-capacity", "--params", "7e9", "--layers", 32, "--hidden", 4096,
                   "--gpu-mem-gb", 80, "--n-heads", 32, "--kv-heads", 64,
                   match="kv_heads 64 exceeds n_heads 32")
    rc, _ = err_of(capsys, "kv-capacity", "--params", "7e9", "--layers", 32, "--hidden", 4096,
                   "--gpu-mem-gb", 80, "--n-heads", 32, "--kv-heads", 8)
    assert rc == 0

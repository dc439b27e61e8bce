"""Small Azure-format trace files written by tests."""

from __future__ import annotations

from pathlib import Path

#: the Azure LLM inference trace's header
AZURE = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


def azure_csv(path: Path, rows: list[tuple[str, int, int]]) -> Path:
    """``rows`` of (timestamp, prompt, output) written at ``path``."""
    path.write_text(AZURE + "".join(f"{t},{i},{o}\n" for t, i, o in rows))
    return path


def azure(tmp_path, *rows):
    """(prompt, output) rows one second apart, as ``tmp_path/azure.csv``."""
    p = tmp_path / "azure.csv"
    p.write_text(AZURE + "".join(f"2023-11-16 18:15:{46 + k}.0,{i},{o}\n"
                                 for k, (i, o) in enumerate(rows)))
    return p

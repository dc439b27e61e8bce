"""The ``optsched`` program (``optsched.cli.run``) leaves with ``os._exit`` after flushing its
output and running the ``atexit`` handlers (interpreter teardown was ~0.1 s of a
1 s full-trace simulate). What a caller sees must not change: the exit code, every byte of
stdout and stderr, and the ``atexit`` handlers run."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_helpers import fuzz_check, fuzz_run, fuzz_write
from paths import REPO

from optsched.cli import build_parser

CHILD = """
import atexit, sys
atexit.register(lambda: print("atexit handler ran", file=sys.stderr))
sys.argv = ["optsched", *sys.argv[1:]]
from optsched.cli import run
run()
"""


def _program(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, text=True,
                          timeout=120)


def test_output_exit_code_and_atexit_handlers_survive_the_fast_exit():
    p = _program("policies", "--json")
    assert p.returncode == 0, p.stderr
    policies = json.loads(p.stdout)  # the whole document arrived (flushed before os._exit)
    assert any(row["name"] == "vllm" for row in policies)
    assert "atexit handler ran" in p.stderr


def test_the_exit_code_of_a_failing_command_is_kept():
    p = _program("simulate", "no-such-instance.json", "--policy", "vllm")
    assert p.returncode == 2
    assert "error" in p.stderr and "atexit handler ran" in p.stderr


def test_python_dash_m_uses_the_program_entry():
    p = subprocess.run([sys.executable, "-m", "optsched", "policies", "--json"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and json.loads(p.stdout)




def _commands(parser) -> set[str]:
    return set(parser._subparsers._group_actions[0].choices)  # noqa: SLF001


def test_every_command_resolves_to_the_module_that_registers_it():
    full = _commands(build_parser())
    assert {"simulate", "policies", "evaluate", "validate", "generate", "kv-capacity"} <= full
    for cmd in full:
        lazy = build_parser([cmd, "x"])
        assert cmd in _commands(lazy), cmd
        # the lazy parser parses the same way: the command's own handler is selected
        assert lazy._subparsers._group_actions[0].choices[cmd].get_default("func") \
            .__name__ == build_parser()._subparsers._group_actions[0].choices[cmd] \
            .get_default("func").__name__  # noqa: SLF001


def test_each_command_lives_in_the_module_named_like_it():
    parser = build_parser()
    for cmd, sub in parser._subparsers._group_actions[0].choices.items():  # noqa: SLF001
        assert sub.get_default("func").__module__ == f"optsched.cli.{cmd.replace('-', '_')}", cmd


def test_simulate_does_not_import_the_other_commands():
    code = ("import sys; from optsched.cli import build_parser; build_parser(['simulate']); "
            "print(sorted(m for m in sys.modules if m.startswith('optsched.cli.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=REPO, check=True).stdout
    assert out.strip() == "['optsched.cli._common', 'optsched.cli.simulate']"


def test_the_shared_helpers_do_not_import_the_solvers_or_numba():
    """``evaluate`` and ``simulate`` start without :mod:`optsched.comparison` (the solvers,
    the search) and without numba, which the compiled paths import when they run (the table
    formatter ``fmt`` once came from the comparison module and brought them all in)."""
    heavy = ("numba", "optsched.comparison", "optsched.solving", "optsched.search")
    code = ("import sys; from optsched.cli import build_parser\n"
            "for cmd in ('evaluate', 'simulate'):\n"
            "    build_parser([cmd])\n"
            f"print(sorted(m for m in {heavy!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=REPO, check=True).stdout
    assert out.strip() == "[]"




INSTANCE = json.loads((REPO / "instances" / "arrivals-unit-3.json").read_text())


SCHEDULE = {"batches": [{"entries": [["a", 2]]}, {"entries": [["a", 1], ["b", 2]]},
                        {"entries": [["a", 1], ["b", 1]]}, {"entries": [["b", 1], ["c", 2]]},
                        {"entries": [["c", 1]]}, {"entries": [["c", 1]]}]}


TRACE = ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.0,50,5\n"
         "2023-11-16 18:15:46.5,60,4\n2023-11-16 18:15:47.1,30,8\n")


#: replacement values for a JSON leaf: wrong types, out of range, non-finite, odd text
VALUES: list = [None, -1, 0, 1.5, 2**70, 1e300, -1e-300, True, "x", "", [], {}, [1, 2],
                {"k": 1}, "\ud800", "a\nb"]


CONSTANTS = ["NaN", "Infinity", "-Infinity"]


def _paths(node, prefix=()):
    """Every (path, value) of a JSON document, containers included."""
    yield prefix, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, (*prefix, i))


def _set(doc, path, value):
    node = doc
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value


def mutate_json(doc: dict, rng: random.Random) -> str:
    """One structural or textual mutation of ``doc``, as file text."""
    doc = json.loads(json.dumps(doc))
    paths = [p for p, _ in _paths(doc) if p]
    path = rng.choice(paths)
    kind = rng.randrange(8)
    if kind == 0:  # delete a key / an item
        node = doc
        for k in path[:-1]:
            node = node[k]
        del node[path[-1]]
    elif kind == 1:  # unknown key
        node = doc
        for k in path[:-1]:
            node = node[k]
        if isinstance(node, dict):
            node["unexpected"] = 1
        else:
            _set(doc, path, rng.choice(VALUES))
    elif kind in (2, 3, 4):
        _set(doc, path, rng.choice(VALUES))
    elif kind == 5:  # a non-finite constant where a value was
        _set(doc, path, "@@")
        return json.dumps(doc).replace('"@@"', rng.choice(CONSTANTS))
    elif kind == 6:  # a duplicate key
        text = json.dumps(doc)
        i = text.find('": ', rng.randrange(len(text)))
        if i > 0:
            j = text.rfind('"', 0, i)
            key = text[j:i + 1]
            return text[:j] + key + ": 0, " + text[j:]
        return text
    text = json.dumps(doc)
    return _mutate_bytes(text, rng)


def _mutate_bytes(text: str, rng: random.Random) -> str:
    cut = rng.randrange(len(text) + 1)
    choice = rng.randrange(4)
    if choice == 0:
        return text[:cut]  # truncated
    if choice == 1:
        return text[:cut] + rng.choice(["{", "]", "\x00", "\\", '"', "[" * 2000]) + text[cut:]
    if choice == 2:
        return ""
    return text[:cut] + text[cut + 1:]


def mutate_trace(rng: random.Random) -> str:
    lines = TRACE.splitlines()
    k = rng.randrange(len(lines))
    cells = lines[k].split(",")
    c = rng.randrange(len(cells))
    cells[c] = rng.choice(["", "-5", "1e400", "nan", "x", "0", "3.5", "\ud800", "2023-13-45"])
    if rng.random() < 0.3:
        cells = cells[:-1]
    lines[k] = ",".join(cells)
    if rng.random() < 0.2:
        lines = lines[:1]
    return "\n".join(lines) + "\n"








def _reading_commands(tmp: Path, inst: Path, sched: Path) -> list[tuple[list[str], bool]]:
    """Every command that reads an instance or a schedule (argv, may the solver fail)."""
    return [
        (["info", str(inst)], False),
        (["validate", str(inst), str(sched), "--json"], False),
        (["evaluate", str(inst), str(sched), "--json"], False),
        (["plot", str(inst), str(sched), "-o", str(tmp / "p.png")], False),
        (["simulate", str(inst), "--policy", "vllm", "--json"], False),
        (["bound", str(inst), "--time-limit", "1", "--json"], True),
        (["solve", str(inst), "--time-limit", "2", "--warm-start", "none", "--json", "--quiet"],
         True),
        (["improve", str(inst), "--from", str(sched), "--time-limit", "1", "--json"], True),
        (["compare", str(inst), "--policies", "fcfs", "--schedule", f"s={sched}",
          "--no-gantt", "--time-limit", "2", "-o", str(tmp / "rep")], True),
    ]


# the slow commands (a solver, a figure) get fewer cases than the replays
_CHEAP = {"info", "validate", "evaluate", "simulate"}


def fuzz(tmp_path: Path, capsys, seed: int, rounds: int, expensive_every: int) -> None:
    rng = random.Random(seed)
    good_inst = fuzz_write(tmp_path / "good.json", json.dumps(INSTANCE))
    good_sched = fuzz_write(tmp_path / "good_s.json", json.dumps(SCHEDULE))
    for k in range(rounds):
        target = rng.choice(["instance", "schedule", "trace"])
        inst, sched = good_inst, good_sched
        if target == "instance":
            inst = fuzz_write(tmp_path / f"i{k}.json", mutate_json(INSTANCE, rng))
        elif target == "schedule":
            sched = fuzz_write(tmp_path / f"s{k}.json", mutate_json(SCHEDULE, rng))
        else:
            trace = fuzz_write(tmp_path / f"t{k}.csv", mutate_trace(rng))
            lim = ["--kv-capacity", "1000", "--max-batch-tokens", "512"]
            runs = [["simulate", "--trace", str(trace), "--policy", "vllm", *lim, "--json"],
                    ["generate", "azure", "--trace", str(trace), *lim,
                     "-o", str(tmp_path / f"g{k}.json")]]
            if k % expensive_every == 0:
                runs.append(["capacity", str(trace), "--policy", "vllm", "--metric", "mean-jct",
                             "--target", "100", "--probes", "2", *lim, "--json"])
            for argv in runs:
                fuzz_check(*fuzz_run(capsys, argv), argv)
            continue
        for argv, solver in _reading_commands(tmp_path, inst, sched):
            if argv[0] not in _CHEAP and k % expensive_every:
                continue
            fuzz_check(*fuzz_run(capsys, argv), argv, solver)


def test_fuzz_cli_small(tmp_path, capsys):
    fuzz(tmp_path, capsys, seed=30, rounds=60, expensive_every=12)


@pytest.mark.slow
def test_fuzz_cli_large(tmp_path, capsys):
    fuzz(tmp_path, capsys, seed=3030, rounds=400, expensive_every=4)


#: the bad-input corpus: each file, each command that reads it: exit 2, one line
CORPUS: dict[str, Callable[[], str]] = {
    "nested-array": lambda: "[" * 1000 + "]" * 1000,
    "nested-object": lambda: '{"a":' * 1000 + "1" + "}" * 1000,
    "empty": lambda: "",
    "whitespace": lambda: "  \n",
    "lone-surrogate-id": lambda: json.dumps(INSTANCE).replace('"id": "a"', '"id": "\\ud800"'),
    "nan-arrival": lambda: json.dumps(INSTANCE).replace('"arrival": 1.0', '"arrival": NaN'),
    "duplicate-key": lambda: json.dumps(INSTANCE).replace('"kv_capacity": 8',
                                                          '"kv_capacity": 8, "kv_capacity": 9'),
    "no-cost-model": lambda: json.dumps({k: v for k, v in INSTANCE.items() if k != "cost_model"}),
    "a-list": lambda: "[1, 2, 3]",
}


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_bad_instance_corpus(tmp_path, capsys, name):
    inst = fuzz_write(tmp_path / "i.json", CORPUS[name]())
    sched = fuzz_write(tmp_path / "s.json", json.dumps(SCHEDULE))
    for argv, _ in _reading_commands(tmp_path, inst, sched):
        rc, out, err = fuzz_run(capsys, argv)
        fuzz_check(rc, out, err, argv)
        assert rc == 2 and len(err.strip().splitlines()) == 1, (argv, err)


@pytest.mark.parametrize("raw", [b"", b"\xff\xfe\x00", "[" * 1000, b"PK\x03\x04garbage",
                                 '{"batches": [{"entries": [["a", 16.5]]}]}',
                                 '{"batches": [], "batches": []}'])
def test_bad_schedule_corpus(tmp_path, capsys, raw):
    inst = fuzz_write(tmp_path / "i.json", json.dumps(INSTANCE))
    f = tmp_path / "s.json"
    f.write_bytes(raw if isinstance(raw, bytes) else raw.encode())
    for cmd in ("validate", "evaluate"):
        argv = [cmd, str(inst), str(f), "--json"]
        rc, out, err = fuzz_run(capsys, argv)
        fuzz_check(rc, out, err, argv)
        assert rc == 2 and len(err.strip().splitlines()) == 1, (argv, err)


# -- sweep, check-claim, fit and demo --------------------------------------------------------
SPEC = """[sweep]
name = "fz"
trials = 1
objective = "total-latency"

[[instances]]
generator = "online-paper"
n = 3
arrival = "offline"

[[methods]]
policy = "fcfs"

[[methods]]
bound = "best"
time_limit = 1
"""


#: replacement values for a TOML value: wrong types, out of range, non-finite, not TOML
TOML_VALUES = ["-1", "0", "1.5", "1e400", "nan", "inf", "-inf", '"x"', '""', "[]", "{}",
               "true", "[1, 2]", '"\\ud800"', "9999999999999999999999", "@"]


def mutate_toml(rng: random.Random) -> str:
    """One mutation of :data:`SPEC`: a value replaced, a line deleted or duplicated, a key
    renamed, a header broken, or the text cut, emptied or given a stray character."""
    lines = SPEC.splitlines()
    assigns = [i for i, ln in enumerate(lines) if " = " in ln]
    kind = rng.randrange(7)
    if kind <= 2:
        i = rng.choice(assigns)
        lines[i] = lines[i].split(" = ")[0] + " = " + rng.choice(TOML_VALUES)
    elif kind == 3:
        del lines[rng.randrange(len(lines))]
    elif kind == 4:
        i = rng.randrange(len(lines))
        lines.insert(i, lines[i])
    elif kind == 5:
        i = rng.choice(assigns)
        lines[i] = "unexpected" + lines[i][lines[i].index(" = "):]
    else:
        return _mutate_bytes(SPEC, rng)
    return "\n".join(lines) + "\n"


def test_fuzz_sweep_specs(tmp_path, capsys):
    """Mutated sweep specs: every one through ``--dry-run`` (parsing and checking), every
    sixth also computed (a process pool per run, so few)."""
    rng = random.Random(3030)
    for k in range(36):
        spec = fuzz_write(tmp_path / f"s{k}.toml", mutate_toml(rng))
        runs = [["sweep", "run", str(spec), "-o", str(tmp_path / f"o{k}"), "--dry-run", "--json"]]
        if k % 6 == 0:
            runs.append(["sweep", "run", str(spec), "-o", str(tmp_path / f"r{k}"), "--workers",
                         "1", "--json", "--quiet"])
        for argv in runs:
            fuzz_check(*fuzz_run(capsys, argv), argv, solver=True)  # 3: a run with failed cells


#: bad values for each check-claim option (argparse's type errors included)
CLAIM_ARGS = {"--trials": ["-1", "0", "x", "nan", "1e3", ""],
              "--max-requests": ["-3", "0", "13", "x", "2.5"],
              "--seed": ["-1", "nan", "x", ""],
              "--write": ["{file}", "{file}/sub", "/dev/null/x"]}


CLAIMS = ["mcsf-optimal", "aptserve-2approx", "amin-hsf-optimal", "svf-ratio"]


def test_fuzz_check_claim_args(tmp_path, capsys):
    """Each claim with one bad option (small valid values otherwise): exit 2, one line on
    stderr (argparse's usage for type errors), nothing on stdout; an unknown claim too."""
    rng = random.Random(30)
    afile = fuzz_write(tmp_path / "afile", "x")
    for _ in range(20):
        opt = rng.choice(sorted(CLAIM_ARGS))
        bad = rng.choice(CLAIM_ARGS[opt]).format(file=afile)
        base = {"--trials": "2", "--max-requests": "2", "--seed": "0"}
        base[opt] = bad
        argv = ["check-claim", rng.choice(CLAIMS), *[x for kv in base.items() for x in kv],
                "--json"]
        rc, out, err = fuzz_run(capsys, argv)
        fuzz_check(rc, out, err, argv)
        assert rc == 2, (argv, rc, err)
    argv = ["check-claim", "no-such-claim", "--json"]
    rc, out, err = fuzz_run(capsys, argv)
    fuzz_check(rc, out, err, argv)
    assert rc == 2


def _profiling_dir(root: Path) -> Path:
    """A synthetic, valid profiling directory (the columns ``optsched.workloads.fit`` reads; times
    linear in the tokens), so the fuzz runs without the shared data."""
    root.mkdir()
    mlp = ["num_tensor_parallel_workers,n_head,n_kv_head,num_tokens,"
           "time_stats.mlp_up_proj.median,time_stats.attn_pre_proj.median"]
    mlp += [f"1,32,32,{t},{0.01 + 1e-4 * t:.6f},{0.002 + 2e-5 * t:.6f}"
            for t in (1, 16, 64, 256, 1024)]
    att = ["is_prefill,batch_size,prefill_chunk_size,kv_cache_size,attn_decode_median_ms,"
           "attn_prefill_median_ms"]
    att += [f"False,{b},0,{m},{0.005 + 1e-6 * b * m + 1e-4 * b:.6f},"
            for b, m in ((1, 32), (8, 256), (32, 1024), (64, 64))]
    att += [f"True,1,{c},{m},,{0.01 + 1e-7 * c * c + 1e-7 * c * m + 1e-6 * m:.6f}"
            for c, m in ((64, 0), (256, 128), (1024, 512), (512, 0), (128, 1024))]
    (root / "mlp_a100_Llama-2-7b-hf.csv").write_text("\n".join(mlp) + "\n")
    (root / "attention_samples_a100_Llama-2-7b-hf.csv").write_text("\n".join(att) + "\n")
    return root


def _mutate_csv(text: str, rng: random.Random) -> str:
    lines = text.splitlines()
    k = rng.randrange(len(lines))
    cells = lines[k].split(",")
    c = rng.randrange(len(cells))
    cells[c] = rng.choice(["", "-5", "1e400", "nan", "x", "0", "maybe", "\ud800", "inf"])
    if rng.random() < 0.3:
        cells = cells[:-1]
    lines[k] = ",".join(cells)
    if rng.random() < 0.2:
        lines = lines[:1]
    if rng.random() < 0.1:
        return _mutate_bytes("\n".join(lines), rng)
    return "\n".join(lines) + "\n"


def test_fuzz_fit(tmp_path, capsys):
    """``fit`` on the synthetic profiling directory (exit 0, one JSON document), with one of
    its files mutated or missing, or a bad directory or option (exit 0 or 2, no traceback)."""
    good = _profiling_dir(tmp_path / "good")
    argv = ["fit", "--profiling", str(good), "--json"]
    rc, out, err = fuzz_run(capsys, argv)
    fuzz_check(rc, out, err, argv)
    assert rc == 0 and json.loads(out)["cost_model"]["kind"] == "linear", err
    names = sorted(p.name for p in good.iterdir())
    rng = random.Random(31)
    for k in range(30):
        d = tmp_path / f"p{k}"
        d.mkdir()
        victim = rng.choice(names)
        for name in names:
            if name != victim:
                (d / name).write_text((good / name).read_text())
        if rng.random() < 0.85:
            fuzz_write(d / victim, _mutate_csv((good / victim).read_text(), rng))
        argv = ["fit", "--profiling", str(d), "--json"]
        fuzz_check(*fuzz_run(capsys, argv), argv)
    afile = fuzz_write(tmp_path / "afile", "x")
    for extra in (["--profiling", str(tmp_path / "missing")], ["--profiling", str(afile)],
                  ["--profiling", str(good), "--tp", "0"],
                  ["--profiling", str(good), "--layers", "-1"],
                  ["--profiling", str(good), "--model", "nosuch"],
                  ["--profiling", str(good), "--attention", str(afile)],
                  ["--profiling", str(good), "-o", str(tmp_path)],
                  ["--profiling", str(good), "-o", f"{afile}/x.json"]):
        argv = ["fit", *extra, "--json"]
        rc, out, err = fuzz_run(capsys, argv)
        fuzz_check(rc, out, err, argv)
        assert rc == 2 and len(err.strip().splitlines()) == 1, (argv, err)

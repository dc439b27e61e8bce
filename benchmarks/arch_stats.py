"""Architecture numbers for ``optsched/`` from the source alone (``docs/architecture.md``).

    python -m benchmarks.arch_stats [--root optsched] > studies/architecture/results/arch-after.txt

Reads every ``.py`` file with :mod:`ast` (nothing is imported) and prints:

- the import graph between optsched modules: module count, edges, and the strongly connected
  components with more than one module (import circles). Edges count imports at module top
  *and* inside functions (an import moved into a function still makes a circle, it only hides
  it from the interpreter); imports under ``if TYPE_CHECKING:`` are left out (never run), and
  counted separately: the edges, circles and upward imports with them included (the layer
  contract counts them too);
- function-local imports, split into those marked as deliberate (a ``# lazy`` comment on the
  import, or a ``# lazy`` comment line heading its block of imports: an optional or heavy
  dependency, or CLI start-up time)
  and the unmarked rest, which counts the optsched-internal ones separately;
- upward imports against :data:`LAYERS` (the same order as the import-linter contract in
  ``pyproject.toml``; the old top-level module names are listed too so that the numbers
  before the move are comparable);
- a function-length table (functions and methods, nested ones included, by source lines) and
  the 20 longest.
"""

from __future__ import annotations

import argparse
import ast
import sys
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

# Top to bottom; a module may import from its own layer's package and from layers below it.
# Modules are matched by the longest listed prefix. Old names (before the layered move) are
# kept next to their new packages so that one list measures both layouts.
LAYERS: list[list[str]] = [
    ["optsched.cli", "optsched.__main__", "optsched.warm"],
    ["optsched.sweep"],
    ["optsched.comparison", "optsched.compare"],
    ["optsched.plot"],
    ["optsched.serving", "optsched.rate_search", "optsched.ceiling"],
    ["optsched.checks"],
    ["optsched.solving", "optsched.pipeline", "optsched.budget"],
    ["optsched.search", "optsched.lns", "optsched.lns_decode", "optsched.keysearch",
     "optsched.prefill_phase"],
    ["optsched.oracles", "optsched.bros_ip", "optsched.manifest"],
    ["optsched.bounds"],
    ["optsched.formulations"],
    ["optsched.workloads", "optsched.generators", "optsched.hybrid", "optsched.traces",
     "optsched.fit", "optsched.chat_lengths", "optsched.capacity"],
    ["optsched.policies"],
    ["optsched.metrics", "optsched.serving_metrics"],
    ["optsched.milp"],
    ["optsched.data", "optsched.verdict", "optsched.instance", "optsched.schedule",
     "optsched.cost", "optsched.evaluate", "optsched.evaluate_fast", "optsched.solve_types",
     "optsched.objectives",
     "optsched.jsonio", "optsched.errors", "optsched.progress", "optsched.stdout_guard",
     "optsched.plugins", "optsched._api", "optsched.numba_load", "optsched.evaluation",
     "optsched.runtime"],
]

BUCKETS = [(1, 10), (11, 25), (26, 50), (51, 100), (101, 200), (201, 10**9)]


@dataclass
class ModuleInfo:
    """One source file: its dotted name, whether it is a package ``__init__``, its imports."""

    name: str
    path: Path
    is_package: bool
    edges: set[str] = field(default_factory=set)
    local_marked: int = 0
    local_unmarked_internal: int = 0
    local_unmarked_external: int = 0
    upward: list[str] = field(default_factory=list)
    #: the targets of imports under ``if TYPE_CHECKING:`` (not in ``edges``)
    type_edges: set[str] = field(default_factory=set)


def module_name(root: Path, path: Path) -> tuple[str, bool]:
    """Dotted name of ``path`` under the package directory ``root``; True for ``__init__``."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def resolve(info: ModuleInfo, node: ast.ImportFrom | ast.Import, known: set[str]) -> list[str]:
    """The optsched modules an import statement loads (submodules named in ``from x import y``
    count as the submodule; other names as the module ``x``)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name in known]
    if node.level:
        base = info.name.split(".") if info.is_package else info.name.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        mod = ".".join(base + ([node.module] if node.module else []))
    else:
        mod = node.module or ""
    out = []
    for a in node.names:
        sub = f"{mod}.{a.name}"
        if sub in known:
            out.append(sub)
        elif mod in known:
            out.append(mod)
    return out


def is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def marked_lazy(lines: list[str], node: ast.stmt) -> bool:
    """A ``# lazy`` comment on the import's own lines, or on the comment line that heads the
    block of consecutive import lines it belongs to."""
    lo, hi = node.lineno - 1, node.end_lineno or node.lineno
    if any("# lazy" in ln for ln in lines[lo:hi]):
        return True
    k = lo - 1
    while k >= 0 and lines[k].strip().startswith(("from ", "import ", ")")) or (
            k >= 0 and lines[k].startswith(" ") and lines[k].strip().endswith(",")):
        k -= 1
    return k >= 0 and lines[k].strip().startswith("# lazy")


def walk_imports(tree: ast.AST, type_checking: bool = False):
    """Yield (import node, inside a function) for every import not under TYPE_CHECKING, or,
    with ``type_checking``, for every import under it."""
    def visit(node: ast.AST, in_func: bool, under: bool = False):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and is_type_checking(child):
                for sub in child.body:
                    yield from visit_one(sub, in_func, True)
                for sub in child.orelse:
                    yield from visit_one(sub, in_func, under)
                continue
            yield from visit_one(child, in_func, under)

    def visit_one(child: ast.AST, in_func: bool, under: bool):
        if isinstance(child, ast.Import | ast.ImportFrom) and under == type_checking:
            yield child, in_func
        inner = in_func or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        yield from visit(child, inner, under)

    yield from visit(tree, False)


def layer_of(name: str) -> int | None:
    """Index in :data:`LAYERS` (0 = top) of the longest matching prefix, or None."""
    best, best_len = None, -1
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if (name == p or name.startswith(p + ".")) and len(p) > best_len:
                best, best_len = i, len(p)
    return best


def scan(root: Path) -> tuple[dict[str, ModuleInfo], list[tuple[str, Path, int, int]]]:
    """Modules with their import edges and function-local import counts; all functions as
    (qualified name, path, first line, length in lines)."""
    paths = sorted(root.rglob("*.py"))
    mods: dict[str, ModuleInfo] = {}
    for p in paths:
        name, pkg = module_name(root, p)
        mods[name] = ModuleInfo(name, p, pkg)
    known = set(mods)
    funcs: list[tuple[str, Path, int, int]] = []
    for info in mods.values():
        src = info.path.read_text()
        tree = ast.parse(src)
        lines = src.splitlines()
        for node, _ in walk_imports(tree, type_checking=True):
            info.type_edges.update(t for t in resolve(info, node, known) if t != info.name)
        for node, in_func in walk_imports(tree):
            targets = [t for t in resolve(info, node, known) if t != info.name]
            info.edges.update(targets)
            if not in_func:
                continue
            if marked_lazy(lines, node):
                info.local_marked += 1
            elif targets:
                info.local_unmarked_internal += 1
            else:
                info.local_unmarked_external += 1
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                funcs.append((f"{info.name}.{node.name}", info.path, node.lineno, n))
    return mods, funcs


def sccs(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components (Tarjan, iterative) with more than one node."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return sorted(out)


def upward_imports(mods: dict[str, ModuleInfo], type_checking: bool = False
                   ) -> list[tuple[str, str]]:
    """Imports from a lower layer to a higher one (smaller index in :data:`LAYERS`); with
    ``type_checking``, those under ``if TYPE_CHECKING:`` too."""
    out = []
    for info in mods.values():
        la = layer_of(info.name)
        if la is None:
            continue
        for t in sorted(info.edges | (info.type_edges if type_checking else set())):
            lb = layer_of(t)
            if lb is not None and lb < la:
                out.append((info.name, t))
    return out


def contract_ignores(root: Path) -> set[tuple[str, str]]:
    """The imports the import-linter contracts ignore (``pyproject.toml`` beside ``root``)."""
    path = root.parent / "pyproject.toml"
    if not path.exists():
        return set()
    cfg = tomllib.loads(path.read_text()).get("tool", {}).get("importlinter", {})
    out = set()
    for contract in cfg.get("contracts", []):
        for line in contract.get("ignore_imports", []):
            a, b = (x.strip() for x in line.split("->"))
            out.add((a, b))
    return out


def report(root: Path) -> str:
    mods, funcs = scan(root)
    graph = {m: mods[m].edges for m in mods}
    comps = sccs(graph)
    ignores = contract_ignores(root)
    left = sccs({m: {t for t in e if (m, t) not in ignores} for m, e in graph.items()})
    up = upward_imports(mods)
    full = {m: mods[m].edges | mods[m].type_edges for m in mods}
    full_left = sccs({m: {t for t in e if (m, t) not in ignores} for m, e in full.items()})
    up_full = upward_imports(mods, type_checking=True)
    top = [m for m in mods if m.count(".") == 1 and not mods[m].is_package]
    out = [f"# optsched architecture numbers (benchmarks/arch_stats.py, root {root})", ""]
    out.append(f"modules                         {len(mods)}")
    out.append(f"modules loose at the top level  {len(top)}")
    out.append(f"import edges (optsched->optsched, TYPE_CHECKING excluded)  "
               f"{sum(len(e) for e in graph.values())}")
    out.append(f"import circles (SCCs > 1 module)  {len(comps)}")
    for c in comps:
        out.append(f"  [{len(c)}] " + " ".join(c))
    out.append(f"import circles without the {len(ignores)} imports the layer contract ignores  "
               f"{len(left)}")
    for a, b in sorted(ignores):
        out.append(f"  ignored: {a} -> {b}")
    marked = sum(i.local_marked for i in mods.values())
    internal = sum(i.local_unmarked_internal for i in mods.values())
    external = sum(i.local_unmarked_external for i in mods.values())
    out.append(f"with TYPE_CHECKING imports counted: edges {sum(len(e) for e in full.values())}, "
               f"circles {len(sccs(full))}, without the ignored imports {len(full_left)}, "
               f"upward imports {len(up_full)}")
    for c in full_left:
        out.append(f"  [{len(c)}] " + " ".join(c))
    for a, b in up_full:
        if (a, b) not in up:
            out.append(f"  upward (TYPE_CHECKING): {a} -> {b}")
    out.append(f"function-local imports          {marked + internal + external}")
    out.append(f"  marked '# lazy' (deliberate)  {marked}")
    out.append(f"  unmarked, of optsched modules {internal}")
    out.append(f"  unmarked, of other packages   {external}")
    unlayered = sorted(m for m in mods if layer_of(m) is None and m != "optsched")
    out.append(f"modules outside the layer list  {len(unlayered)}  {' '.join(unlayered)}")
    out.append(f"upward imports (against LAYERS) {len(up)}")
    for a, b in up:
        out.append(f"  {a} -> {b}")
    out.append("")
    out.append(f"functions                       {len(funcs)}")
    counts = Counter()
    for _, _, _, n in funcs:
        for lo, hi in BUCKETS:
            if lo <= n <= hi:
                counts[(lo, hi)] += 1
    for lo, hi in BUCKETS:
        label = f"{lo}-{hi} lines" if hi < 10**9 else f">{lo - 1} lines"
        out.append(f"  {label:<16}{counts[(lo, hi)]:>6}")
    out.append("the 20 longest functions (lines, name, file:line)")
    for name, path, line, n in sorted(funcs, key=lambda f: (-f[3], f[0]))[:20]:
        out.append(f"  {n:>4}  {name}  {path.relative_to(root.parent)}:{line}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1] / "optsched")
    args = ap.parse_args(argv)
    print(report(args.root.resolve()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The Python package's imports keep to the layers ARCHITECTURE.md draws.

ARCHITECTURE.md's table "Layers of the Python package" places every module of
``python/verstore`` in a layer, bottom to top; a module may import any module of its own layer
or a layer below, none above, and no chain of imports may lead back to where it started. Every
import counts: at the top of a module, inside a function and under ``TYPE_CHECKING`` alike (a
type-only import still couples the two modules' concepts, and a cycle through it is one edit
away from a runtime cycle).

``from package import name`` depends on the submodule ``package.name`` when there is one, else on
the package's ``__init__``; the implicit import of a package's ``__init__`` before any of its
submodules does not count (a package re-exports its submodules, it is not below them).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "verstore"
SECTION = "## Layers of the Python package"


@dataclass(frozen=True)
class Import:
    """One import statement's dependency on one module of the package."""

    source: str  # importing module
    target: str  # imported module
    file: str
    line: int
    text: str

    def where(self) -> str:
        return f"{self.file}:{self.line}: {self.text}"


def modules_of(source_root: Path) -> dict[str, Path]:
    """Every module of the package below ``source_root`` (``python/``), by dotted name; the
    compiled core counts through its stub."""
    found: dict[str, Path] = {}
    for path in sorted((source_root / PACKAGE).rglob("*.py*")):
        if path.suffix not in (".py", ".pyi") or "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(source_root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found.setdefault(".".join(parts), path)
    return found


def read_layers(architecture: Path) -> list[tuple[str, list[str]]]:
    """The layers of the table under :data:`SECTION`, bottom first: (name, modules)."""
    text = architecture.read_text()
    assert SECTION in text, f"{architecture.name} has no section {SECTION!r}"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    layers = []
    for row in section.splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if not row.startswith("|") or len(cells) < 3 or not cells[0].isdigit():
            continue
        assert int(cells[0]) == len(layers) + 1, f"layers are numbered 1, 2, ... upwards: {row}"
        layers.append((cells[1], modules_in(cells[2])))
    assert layers, f"no layer rows under {SECTION!r} in {architecture.name}"
    return layers


def modules_in(cell: str) -> list[str]:
    """The modules a table cell names: `verstore.x.y`, and `.z` for `verstore.x.z` (the package
    of the cell's first module); other code spans (`_core.pyi`) are remarks."""
    names = [
        n
        for n in re.findall(r"`([\w.]+)`", cell)
        if n == PACKAGE or n[0] == "." or n.startswith(PACKAGE + ".")
    ]
    full = [n for n in names if n[0] != "."]
    package = full[0].rsplit(".", 1)[0] if full else PACKAGE
    return [package + n if n[0] == "." else n for n in names]


def resolve(module: str, level: int, name: str | None, is_package: bool) -> str:
    """The absolute name of a (possibly relative) import's base module."""
    if level == 0:
        return name or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, *([name] if name else [])])


def read_imports(modules: dict[str, Path], repo: Path) -> list[Import]:
    """Every dependency of a package module on a package module, wherever the import stands."""
    edges = []
    for module, path in modules.items():
        if path.suffix != ".py":
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        lines = path.read_text().splitlines()
        file = str(path.relative_to(repo))
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = resolve(module, node.level, node.module, is_package)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in modules else base)
            else:
                continue
            text = lines[node.lineno - 1].strip()
            for target in dict.fromkeys(targets):
                if target == PACKAGE or target.startswith(PACKAGE + "."):
                    edges.append(Import(module, target, file, node.lineno, text))
    return edges


def find_cycle(edges: list[Import]) -> list[Import] | None:
    """One import cycle (its edges in order), or None: a depth-first search that reports the
    first back edge it meets."""
    graph: dict[str, list[Import]] = {}
    for edge in sorted(edges, key=lambda e: (e.source, e.file, e.line, e.target)):
        graph.setdefault(edge.source, []).append(edge)
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[Import] = []

    def visit(module: str) -> list[Import] | None:
        state[module] = 1
        for edge in graph.get(module, []):
            if edge.target == module:
                return [edge]
            seen = state.get(edge.target)
            if seen == 1:
                start = next(i for i, e in enumerate(path) if e.source == edge.target)
                return [*path[start:], edge]
            if seen is None:
                path.append(edge)
                found = visit(edge.target)
                if found:
                    return found
                path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state:
            found = visit(module)
            if found:
                return found
    return None


def layer_problems(repo: Path) -> list[str]:
    """What breaks the declared layering in the checkout at ``repo``, one line each."""
    modules = modules_of(repo / "python")
    layers = read_layers(repo / "ARCHITECTURE.md")
    place: dict[str, int] = {}
    problems = []
    for number, (_, members) in enumerate(layers, 1):
        for module in members:
            if module in place:
                problems.append(f"{module} is placed twice (layers {place[module]}, {number})")
            place[module] = number
    names = {number: name for number, (name, _) in enumerate(layers, 1)}
    for module, path in modules.items():
        if module not in place:
            problems.append(f"{path.relative_to(repo)}: {module} has no layer in the table")
    for module in place:
        if module not in modules:
            problems.append(f"the table places {module}, which does not exist")
    edges = read_imports(modules, repo)
    for edge in edges:
        low, high = place.get(edge.source), place.get(edge.target)
        if low is not None and high is not None and high > low:
            problems.append(
                f"{edge.where()}: upward import, {edge.source} ({names[low]}) imports "
                f"{edge.target} ({names[high]})"
            )
    cycle = find_cycle(edges)
    if cycle:
        chain = " -> ".join([cycle[0].source, *[e.target for e in cycle]])
        problems.append(f"import cycle {chain}: " + "; ".join(edge.where() for edge in cycle))
    return problems


def test_every_import_looks_down_and_no_import_closes_a_cycle() -> None:
    problems = layer_problems(ROOT)
    assert not problems, "\n".join(problems)


def test_a_cycle_is_found_with_its_imports(tmp_path: Path) -> None:
    package = tmp_path / "python" / PACKAGE
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from verstore import b\n")
    (package / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from verstore.c import X\n"
    )
    (package / "c.py").write_text("from .a import f\n")
    (tmp_path / "ARCHITECTURE.md").write_text(
        f"{SECTION}\n\n| layer | name | modules |\n|---|---|---|\n"
        "| 1 | all | `verstore`, `verstore.a`, `verstore.b`, `verstore.c` |\n"
    )
    [problem] = layer_problems(tmp_path)
    assert problem.startswith("import cycle verstore.a -> verstore.b -> verstore.c -> verstore.a")
    assert "python/verstore/b.py:3: from verstore.c import X" in problem
    assert "python/verstore/c.py:1: from .a import f" in problem


def test_an_upward_and_an_unplaced_module_are_named(tmp_path: Path) -> None:
    package = tmp_path / "python" / PACKAGE
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text("import verstore.high\n")
    (package / "high.py").write_text("")
    (package / "stray.py").write_text("")
    (tmp_path / "ARCHITECTURE.md").write_text(
        f"{SECTION}\n\n| layer | name | modules |\n|---|---|---|\n"
        "| 1 | low | `verstore`, `verstore.low` |\n| 2 | high | `verstore.high` |\n"
    )
    assert layer_problems(tmp_path) == [
        "python/verstore/stray.py: verstore.stray has no layer in the table",
        "python/verstore/low.py:1: import verstore.high: upward import, verstore.low (low) "
        "imports verstore.high (high)",
    ]

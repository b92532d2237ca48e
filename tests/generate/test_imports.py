"""No import cycles in ``tmax.generate``: a module of it can be imported first, alone,
and its package ``__init__`` never runs half-way through a sibling's import.

The graph is read from the source (``ast``), so a cycle fails here even where the
current import order happens to work: a module imports what its module-level import
statements name, and importing ``a.b.c`` imports the packages ``a`` and ``a.b`` first.

One edge is left out: a module's own enclosing packages, where the module reaches them
only on the way to a submodule (``from a.b.c import x`` inside ``a.b.d``). Those
packages are already being imported when the module runs, and nothing is read from
them, so a domain package that imports its family folders, each of which imports a
sibling helper module, works in every order. Reading a name from an enclosing package
(``from a.b import helper``, ``helper`` not a module) is still an edge.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"


def module_files(src: Path, package: str) -> dict[str, Path]:
    """``{dotted module name: source file}`` of ``package`` and everything below it:
    the ``.py`` files of its packages, not those of a family's template folders
    (``tests/``, ``solution/``: no ``__init__.py``), which are task files, not modules."""
    files = {}
    root = src.joinpath(*package.split("."))
    for path in sorted(root.rglob("*.py")):
        folders = [path.parent, *(p for p in path.parent.parents if p.is_relative_to(root))]
        if not all((folder / "__init__.py").is_file() for folder in folders):
            continue
        parts = path.relative_to(src).with_suffix("").parts
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return files


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def import_statements(
    tree: ast.Module, in_functions: bool = False
) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements that run when the module is imported: not those in
    functions (they run when called; ``in_functions``: those too) nor under
    ``if TYPE_CHECKING:`` (never run)."""
    pending: list[ast.AST] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            pending.extend(node.orelse)
        elif in_functions or not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            pending.extend(
                child
                for child in ast.iter_child_nodes(node)
                if isinstance(child, ast.stmt | ast.excepthandler | ast.match_case)
            )


def imported_names(module: str, is_package: bool, node: ast.Import | ast.ImportFrom) -> list[str]:
    """What one import statement of ``module`` may import: each module it names, and
    for ``from x import y`` both ``x`` and ``x.y`` (``y`` may be a submodule)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = module if is_package else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}" if base else package
    return [base] + [f"{base}.{alias.name}" for alias in node.names]


def import_graph(src: Path, package: str, in_functions: bool = False) -> dict[str, set[str]]:
    """``{module: the modules of package it imports when it is imported}`` (and, with
    ``in_functions``, when its functions run)."""
    files = module_files(src, package)
    graph: dict[str, set[str]] = {module: set() for module in files}
    for module, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        enclosing = _enclosing(module)
        for node in import_statements(tree, in_functions):
            names = imported_names(module, is_package, node)
            for name in names:
                parts = name.split(".")
                for end in range(1, len(parts) + 1):  # a.b.c imports a and a.b first
                    target = ".".join(parts[:end])
                    on_the_way = end < len(parts) or (
                        isinstance(node, ast.ImportFrom)
                        and name == names[0]
                        and all(other in files for other in names[1:])
                    )
                    if target in enclosing and on_the_way:
                        continue  # already importing: reached only for its submodules
                    if target in files and target != module:
                        graph[module].add(target)
    return graph


def _enclosing(module: str) -> set[str]:
    """The packages that contain ``module`` (``a`` and ``a.b`` for ``a.b.c``)."""
    parts = module.split(".")
    return {".".join(parts[:end]) for end in range(1, len(parts))}


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected components (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    lowlink: dict[str, int] = {}
    stack: list[str] = []
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = lowlink[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                lowlink[node] = min(lowlink[node], lowlink[target])
            elif target in stack:
                lowlink[node] = min(lowlink[node], index[target])
        if lowlink[node] == index[node]:
            component = []
            while not component or component[-1] != node:
                component.append(stack.pop())
            components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def cycle_through(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """One import cycle within a strongly connected ``component``, from its first module
    back to it (the shortest, found breadth first)."""
    start, members = component[0], set(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(graph[node] & members):
                if target == start:
                    return [*paths[node], start]
                if target not in paths:
                    paths[target] = [*paths[node], target]
                    following.append(target)
        frontier = following
    raise ValueError(f"{component} is not strongly connected")


def import_cycles(graph: dict[str, set[str]]) -> list[str]:
    """Each cycle as ``a -> b -> a``, one for every component of two or more modules."""
    return [
        " -> ".join(cycle_through(graph, component)) + f"  (members: {', '.join(component)})"
        for component in strongly_connected(graph)
        if len(component) > 1
    ]


def test_tmax_generate_has_no_import_cycles() -> None:
    graph = import_graph(SRC, "tmax.generate")
    # The graph sees the imports: the generator registers its families by importing them.
    assert "tmax.generate.families" in graph["tmax.generate.procedural"]
    cycles = import_cycles(graph)
    assert not cycles, "import cycles in tmax.generate:\n" + "\n".join(cycles)


def test_a_package_that_re_exports_its_modules_is_a_cycle(tmp_path: Path) -> None:
    """The shape both cycles of tmax.generate had: the package ``__init__`` imports a
    module that reads a name from the package (or from a sibling that does)."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from .shard import run\nLIMIT = 3\n")
    (package / "shard.py").write_text(
        "from pkg.settings import Settings\n\n\ndef run():\n    import pkg.later\n"
    )
    (package / "settings.py").write_text("from pkg import LIMIT\nSettings = dict\n")
    (package / "later.py").write_text("import pkg\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.shard"] == {"pkg.settings"}  # not pkg.later: inside a function
    assert graph["pkg.settings"] == {"pkg"}  # LIMIT is read from the half-imported package
    assert import_cycles(graph) == [
        "pkg -> pkg.shard -> pkg.settings -> pkg  (members: pkg, pkg.settings, pkg.shard)"
    ]


def test_a_package_importing_its_own_folders_is_not_a_cycle(tmp_path: Path) -> None:
    """A domain package registering its family folders, one of which imports a helper
    module beside it by its full name: the packages on the way are being imported
    already, and nothing is read from them."""
    domain = tmp_path / "pkg" / "domain"
    (domain / "family").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("from pkg import domain\n")
    (domain / "__init__.py").write_text("from pkg.domain import family\n")
    (domain / "family" / "__init__.py").write_text(
        "from pkg.domain import shared\nfrom pkg.domain.shared import helper\n"
    )
    (domain / "shared.py").write_text("def helper():\n    return 1\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.domain.family"] == {"pkg.domain.shared"}
    assert import_cycles(graph) == []

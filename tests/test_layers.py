"""The package's layers, read from its source: no import circle anywhere inside cudashell, and the pure layers —
the language, the model, the commands — never import the GPU's packages or the terminal's, so the simulator,
the docs and the tests run where neither is installed."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "cudashell"
PURE = ("language", "model", "commands", "output", "export", "teaching", "simt")  # nothing of the GPU or terminal
FOREIGN = ("pycuda", "cuda", "cupti", "prompt_toolkit")
# the layers from the bottom up (docs/architecture.md's table): each imports only those before it
ORDER = ("model", "language", "output", "export", "teaching", "simt", "backends", "commands", "frontends")
TOP = ["__init__.py", "__main__.py", "docs.py", "errors.py", "sizes.py"]  # the package's entry files, and the base
# the crossings the architecture names, each lazy and for a reason
CROSSINGS = {("cudashell.language.registry", "cudashell.commands"),  # registering the handlers (registry.load)
             ("cudashell.language.argkinds", "cudashell.teaching.shipped"),  # completion of the shipped demos' names
             ("cudashell.commands.calibrate", "cudashell.frontends.shell")}  # timing the shell's own path


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports(name: str) -> set[str]:
    """Every module of the package (or foreign top-level package, prefixed '!') that `name` imports, at module
    level or inside a function — both run — but not under `if TYPE_CHECKING:` (annotations only)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING"
                   for n in ast.walk(node)}
    out = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                out.add(alias.name if alias.name in MODULES else "!" + alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "cudashell":
                out.add("!" + target.split(".")[0])
                continue
            for alias in node.names:
                full = f"{target}.{alias.name}"
                out.add(full if full in MODULES else target)
    out.discard(name)
    return out


GRAPH = {name: imports(name) for name in MODULES}


def cycles() -> list[list[str]]:
    """The import graph's strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in GRAPH[v]:
            if w not in MODULES:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(MODULES):
        if v not in index:
            visit(v)
    return found


def test_the_graph_is_read_from_real_imports():
    """The reader sees relative, absolute and function-level imports (else 'no cycle' would prove nothing)."""
    assert "cudashell.model.session" in GRAPH["cudashell.frontends.shell"]
    assert "!numpy" in GRAPH["cudashell.simt.frontend"]
    assert any(m.startswith("cudashell.backends") for m in GRAPH["cudashell.frontends.cli"])


def test_no_import_circle_inside_the_package():
    assert cycles() == []


def test_the_pure_layers_import_neither_the_gpu_nor_the_terminal():
    found = [f"{name} imports {m[1:]}" for name, deps in GRAPH.items()
             if name.split(".")[1:2] and name.split(".")[1] in PURE
             for m in deps if m.startswith("!") and m[1:] in FOREIGN]
    assert found == []


def test_every_module_is_in_a_layer_folder():
    """The tree reads as the architecture: at the top only the package's entry files and the shared base."""
    assert sorted(p.name for p in PACKAGE.glob("*.py")) == TOP
    assert sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()) == sorted(ORDER)


def layer(name: str) -> int | None:
    parts = name.split(".")
    return ORDER.index(parts[1]) if len(parts) > 2 and parts[1] in ORDER else None


def test_a_layer_imports_only_the_layers_below_it():
    upward = sorted(f"{name} imports {dep}" for name, deps in GRAPH.items() for dep in deps
                    if layer(name) is not None and layer(dep) is not None and layer(dep) > layer(name)
                    and (name, dep) not in CROSSINGS)
    assert upward == []


def test_the_named_crossings_are_there_and_lazy():
    """Each crossing the architecture allows is still made (else the allowance is stale), inside a function."""
    for name, dep in CROSSINGS:
        assert dep in GRAPH[name], (name, dep)
        tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
        top = {n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))}
        assert not any(dep.rpartition(".")[2] in ast.unparse(n) for n in top), f"{name} imports {dep} at load"


ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"


def _layout_rows() -> dict[str, str]:
    """The architecture's table of folders: folder → the text of its row."""
    rows = {}
    for line in ARCHITECTURE.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) == 2:
            rows[cells[0].split("`")[1].rstrip("/")] = cells[1]
    return rows


def test_the_architecture_names_every_layer_and_each_layers_modules():
    """docs/architecture.md's table is the tree: every folder is a row, every module of the small layers is named in
    its folder's row (commands/, simt/ and the backends' sim/ and gpu/ are named by group), and every module a row
    names is there."""
    rows = _layout_rows()
    assert [k for k in rows if "." not in k] == list(ORDER)  # the table lists the layers in their order
    for folder in ("language", "model", "output", "export", "teaching", "frontends", "backends"):
        named = set(re.findall(r"`([\w/]+\.py)`", rows[folder]))
        present = {p.name for p in (PACKAGE / folder).glob("*.py") if p.name != "__init__.py"}
        assert present <= named, f"{folder}/ has modules its row does not name: {sorted(present - named)}"
        assert named <= present, f"{folder}/'s row names modules that are not there: {sorted(named - present)}"


def test_every_path_the_architecture_names_exists():
    text = ARCHITECTURE.read_text(encoding="utf-8")
    paths = set(re.findall(r"`((?:[\w]+/)+[\w]+\.(?:py|json|md))`", text))
    assert len(paths) > 20
    missing = [p for p in sorted(paths) if "NAME" not in p and not (PACKAGE / p).exists()
               and not (PACKAGE.parent / p).exists()]
    assert missing == []

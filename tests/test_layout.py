"""The package layout holds: layers import downward only, and no modules import each other in a circle.

Read from the source, so it needs no import machinery: mechanisms never imports planner or
dpsql, planner never imports dpsql (module-level imports), and the graph of every import
among the project's modules, those inside functions and under TYPE_CHECKING included, has
no cycle: a module that needs a type from one that imports it takes it as a parameter.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("mechanisms", "planner", "dpsql")
LAYER = {"mechanisms": 0, "planner": 1, "dpsql": 2}


def _modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _imports(path: Path, known: set[str], everywhere: bool = False) -> set[str]:
    """Project modules imported at module level (a package import counts as its __init__); `everywhere`:
    also inside functions and under TYPE_CHECKING."""
    tree = ast.parse(path.read_text())
    found = set()
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test) and not everywhere:
            continue
        for sub in ast.walk(node) if everywhere or not isinstance(node, (ast.FunctionDef, ast.ClassDef)) else []:
            names = []
            if isinstance(sub, ast.Import):
                names = [a.name for a in sub.names]
            elif isinstance(sub, ast.ImportFrom) and sub.module and sub.level == 0:
                names = [sub.module] + [f"{sub.module}.{a.name}" for a in sub.names]
            for name in names:
                while name and name not in known:
                    name = name.rpartition(".")[0]
                if name:
                    found.add(name)
    return found


def test_layers_import_downward_only():
    modules = _modules()
    for name, path in modules.items():
        layer = LAYER[name.split(".")[0]]
        for imported in _imports(path, set(modules)):
            assert LAYER[imported.split(".")[0]] <= layer, f"{name} imports {imported}, a layer above it"


def test_no_import_cycles():
    modules = _modules()
    graph = {name: _imports(path, set(modules), everywhere=True) - {name} for name, path in modules.items()}
    # a package's __init__ importing its own submodules is how it declares its surface, not a cycle
    for name in graph:
        graph[name] = {m for m in graph[name] if not (m.startswith(name + ".") and (modules[name].name == "__init__.py"))}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)

"""The package's layers (emulator/meshemu/README.md, "Map"): every module is
in one, a module imports only from its own layer and the layers below, and
no imports go round in a circle. Every import statement counts, also those
inside functions and under `if TYPE_CHECKING:`."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import meshemu

PACKAGE = Path(meshemu.__file__).parent

# Lowest first. The foundation: errors, limits and the meshemu-medium program.
BASE = {"errors", "limits", "units", "procs", "medium", "generators"}
# Files and what they resolve to, without running anything.
CONFIGURATION = {
    "source", "schema", "profiles", "ns2trace", "sweep", "topology", "choices",
    "experiment.spec", "experiment.runs", "experiment.plan",
    "ns2.support", "ns2.scenario", "sim.support", "sim.scenario",
}
# Labs, backends, plug-ins, drivers, results, the commands.
RUNTIME = {
    "__init__", "__main__", "cli", "cli.common", "cli.labs", "cli.files", "cli.experiments", "cli.cluster",
    "cli.vm", "state", "rundirs", "teardown", "leftovers", "arptable", "kernelstats", "pluginapi", "lab", "backends",
    "hwsim", "nodedaemons", "routing", "queueing", "simfile", "vm", "vmguest",
    "experiment", "experiment.execute", "experiment.runner", "experiment.cluster", "experiment.clusterhost",
    "experiment.results", "experiment.metrics", "experiment.cpu", "experiment.pcap", "experiment.report",
    "experiment.stats", "experiment.demo",
    "ns2", "ns2.driver", "ns2.trace", "sim", "sim.driver",
    "view", "view.live", "view.frames", "view.ranges", "view.server", "view.flows", "view.record", "view.replay",
    "view.routes", "view.source",
    "bench", "bench.bringup", "bench.control", "bench.figures", "bench.frames", "bench.hwsim", "bench.idle",
    "bench.lateness", "bench.proc", "bench.soak", "bench.validate", "bench.view",
}
LAYERS = [("base", BASE), ("configuration", CONFIGURATION), ("runtime", RUNTIME)]


def module_names() -> set[str]:
    """Every module of the package as a name relative to it ("lab",
    "experiment.plan"; a subpackage's __init__ as the subpackage)."""
    names = set()
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts.pop()
        names.add(".".join(parts))
    return names


def imports_of(name: str, modules: set[str]) -> set[str]:
    """The package's modules that `name` imports."""
    path = PACKAGE / (name.replace(".", "/") + ".py")
    if not path.exists():
        path = PACKAGE / name.replace(".", "/") / "__init__.py"
    package = name.split(".")[:-1] if path.name != "__init__.py" or name == "__init__" else name.split(".")
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name.removeprefix("meshemu.") for alias in node.names
                       if alias.name.startswith("meshemu.")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                module = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
            elif (node.module or "").startswith("meshemu"):
                module = node.module.removeprefix("meshemu").removeprefix(".")
            else:
                continue
            # `from . import lab` names a module; `from .lab import Lab` a name in one.
            targets = [f"{module}.{alias.name}".lstrip(".") if f"{module}.{alias.name}".lstrip(".") in modules
                       else module for alias in node.names]
        else:
            continue
        found.update(target for target in targets if target in modules and target != name)
    return found


def graph() -> dict[str, set[str]]:
    modules = module_names()
    return {name: imports_of(name, modules) for name in modules}


def layer_of(name: str) -> int:
    return next(index for index, (_, members) in enumerate(LAYERS) if name in members)


def test_every_module_is_in_one_layer_and_imports():
    modules = module_names()
    listed = BASE | CONFIGURATION | RUNTIME
    assert not modules - listed, f"modules in no layer (add them to {__file__}): {sorted(modules - listed)}"
    assert not listed - modules, f"layers name modules that do not exist: {sorted(listed - modules)}"
    assert len(listed) == len(BASE) + len(CONFIGURATION) + len(RUNTIME), "a module is in two layers"
    for name in sorted(modules - {"__main__"}):  # __main__ would run the CLI
        importlib.import_module("meshemu" if name == "__init__" else f"meshemu.{name}")


def test_no_module_imports_from_a_layer_above_its_own():
    wrong = [f"{name} ({LAYERS[layer_of(name)][0]}) imports {target} ({LAYERS[layer_of(target)][0]})"
             for name, targets in sorted(graph().items()) for target in sorted(targets)
             if layer_of(target) > layer_of(name)]
    assert not wrong, "\n".join(wrong)


def test_no_import_circle():
    imports = graph()
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        if name in path:
            circle = path[path.index(name):] + [name]
            raise AssertionError("import circle: " + " -> ".join(circle))
        if name in done:
            return
        for target in sorted(imports[name]):
            visit(target, path + [name])
        done.add(name)

    for name in sorted(imports):
        visit(name, [])


def test_the_check_sees_an_import_inside_a_function_and_under_type_checking():
    imports = graph()
    assert "view" in imports["cli.labs"]  # `from ..view import serve_lab` in a command's function
    assert "experiment.runs" in imports["ns2.support"]  # under `if TYPE_CHECKING:`
    assert "experiment.plan" in imports["cli.files"]  # `from ..experiment import plan as experiment_plan`

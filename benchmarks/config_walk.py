"""Where a run's config goes: the walk of ``TrainConfig`` from ``Trainer.__init__``.

A setup is easy to follow when the config is read in few places: the plan's module,
which turns it into a plan once, and the parts each field configures. This script
follows the config object through the package's source (no import, no run):

- a **stop** is a function the config reaches, as an argument (``make_plan(config,
  ...)``), as ``self.config`` of the trainer, or as one of its own methods
  (``config.make_kwargs()``);
- a **room** is the module a stop is in;
- a **return** is a stop that hands the config (or a copy of it, ``dataclasses.replace``)
  back to its caller, which then carries it on.

Calls are resolved by name: the module's own functions and classes, the names it imports
from goalenvs, ``self.method`` and ``super().method`` along the class's bases. The one
call chosen at run time, the algorithm's agent class, is followed for DDPG (the default
algorithm). The walk prints each stop with the fields it reads, then the counts:

    python benchmarks/config_walk.py
    python benchmarks/config_walk.py --json
    python benchmarks/config_walk.py --source /tmp/old    # another checkout's goalenvs/
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
START = ("goalenvs.train.trainer", "Trainer.__init__")
CONFIG_CLASS = ("goalenvs.agents.config", "TrainConfig")
COPIES = {"replace"}  # dataclasses.replace(config, ...) is the config again
# Calls made through a registry, by the function that makes them: the class the default
# algorithm (DDPG) gets.
DISPATCH = {("goalenvs.agents.registry", "make_agent"): ("goalenvs.agents.ddpg", "DDPG")}


@dataclass
class Module:
    """One source file: its functions (``name`` or ``Class.name``) and imported names."""

    name: str
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)
    classes: dict[str, list[str]] = field(default_factory=dict)  # class -> base names
    imports: dict[str, tuple[str, str]] = field(default_factory=dict)  # local -> (module, name)


def load_modules(root: Path = ROOT) -> dict[str, Module]:
    """Every module of the package under ``root``, parsed."""
    modules = {}
    for path in sorted((root / "goalenvs").rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        module = Module(name)
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                module.functions[node.name] = node
            elif isinstance(node, ast.ClassDef):
                module.classes[node.name] = [b.id for b in node.bases if isinstance(b, ast.Name)]
                for item in node.body:
                    if isinstance(item, ast.FunctionDef):
                        module.functions[f"{node.name}.{item.name}"] = item
            elif isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    module.imports[alias.asname or alias.name] = (node.module, alias.name)
        modules[name] = module
    return modules


@dataclass
class Stop:
    """A function the config reaches, and the config fields it reads there."""

    module: str
    function: str
    fields: set[str] = field(default_factory=set)
    returns_config: bool = False
    passes_on: bool = False  # hands the config to another function, or keeps it on self

    @property
    def reads(self) -> bool:
        """Whether the config is read here (a field, passed on, kept, or handed back)."""
        return bool(self.fields) or self.returns_config or self.passes_on


class Walk:
    """Follows the config from the start function through every call that passes it on."""

    def __init__(self, modules: dict[str, Module]) -> None:
        self.modules = modules
        self.stops: dict[tuple[str, str], Stop] = {}
        self.holders: set[tuple[str, str]] = set()  # classes whose self.config is the config

    def lookup(self, module: Module, cls: str, method: str) -> tuple[str, str] | None:
        """Where ``cls.method`` is defined: the class itself, else along its bases."""
        if f"{cls}.{method}" in module.functions:
            return (module.name, f"{cls}.{method}")
        for base in module.classes.get(cls, []):
            home = module
            if base in module.imports:
                target, base = module.imports[base]
                if target not in self.modules:
                    continue
                home = self.modules[target]
            found = self.lookup(home, base, method)
            if found:
                return found
        return None

    def resolve(
        self, module: Module, call: ast.Call, cls: tuple[Module, str] | None
    ) -> tuple[str, str] | None:
        """The (module, function) a call names, when it is one of the package's; ``cls``
        is the class ``self`` is (its module and name)."""
        func = call.func
        if isinstance(func, ast.Name):
            name = func.id
            if f"{name}.__init__" in module.functions:
                return (module.name, f"{name}.__init__")
            if name in module.functions:
                return (module.name, name)
            if name in module.imports:
                target, real = module.imports[name]
                other = self.modules.get(target)
                if other is None:
                    return None
                if f"{real}.__init__" in other.functions:
                    return (target, f"{real}.__init__")
                if real in other.functions:
                    return (target, real)
        elif isinstance(func, ast.Attribute) and cls is not None:
            owner, (home, name) = func.value, cls
            if isinstance(owner, ast.Name) and owner.id == "self":
                return self.lookup(home, name, func.attr)
            if (
                isinstance(owner, ast.Call)
                and isinstance(owner.func, ast.Name)
                and owner.func.id == "super"
            ):
                for base in home.classes.get(name, []):
                    target = (home, base)
                    if base in home.imports and home.imports[base][0] in self.modules:
                        target = (self.modules[home.imports[base][0]], home.imports[base][1])
                    found = self.lookup(target[0], target[1], func.attr)
                    if found:
                        return found
        return None

    def visit(
        self, key: tuple[str, str], config_names: set[str], self_class: tuple[str, str] | None
    ) -> bool:
        """Walks one function with the names that hold the config; True when it returns it.
        ``self_class`` is the (module, class) of ``self`` in a method (a subclass's when
        it was reached through one)."""
        if key in self.stops:
            return self.stops[key].returns_config
        module = self.modules[key[0]]
        node = module.functions[key[1]]
        if self_class is None and "." in key[1]:
            self_class = (key[0], key[1].split(".")[0])
        cls = None if self_class is None else (self.modules[self_class[0]], self_class[1])
        stop = self.stops[key] = Stop(*key)
        names = set(config_names)

        def enter(call: ast.Call, target: tuple[str, str], passed: set[str]) -> bool:
            """Visits a callee; a method of ``self`` keeps this ``self``'s class."""
            func = call.func
            on_self = isinstance(func, ast.Attribute) and (
                (isinstance(func.value, ast.Name) and func.value.id == "self")
                or isinstance(func.value, ast.Call)
            )
            returned = self.visit(target, passed, self_class if on_self else None)
            if target in DISPATCH:
                home, name = DISPATCH[target]
                init = self.lookup(self.modules[home], name, "__init__")
                if init:
                    self.visit(init, {"config"}, (home, name))
            return returned

        def holds_config(expr: ast.AST | None) -> bool:
            if isinstance(expr, ast.Name):
                return expr.id in names
            if isinstance(expr, ast.Attribute) and expr.attr == "config":
                return isinstance(expr.value, ast.Name) and expr.value.id == "self"
            if isinstance(expr, ast.Call):
                func = expr.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name in COPIES and expr.args and holds_config(expr.args[0]):
                    return True
                target = self.resolve(module, expr, cls)
                passed = self._passed(expr, target, holds_config)
                if target and passed and enter(expr, target, passed):
                    return True
            return False

        for inner in ast.walk(node):
            if isinstance(inner, ast.Assign | ast.AnnAssign):
                value = inner.value
                targets = inner.targets if isinstance(inner, ast.Assign) else [inner.target]
                if isinstance(value, ast.Tuple):
                    for target in targets:
                        if isinstance(target, ast.Tuple) and len(target.elts) == len(value.elts):
                            names.update(
                                leaf.id
                                for leaf, part in zip(target.elts, value.elts, strict=True)
                                if isinstance(leaf, ast.Name) and holds_config(part)
                            )
                elif value is not None and holds_config(value):
                    if self_class is not None and any(
                        isinstance(t, ast.Attribute) and t.attr == "config" for t in targets
                    ):
                        self.holders.add(self_class)
                        stop.passes_on = True
                    for target in targets:
                        leaves = target.elts if isinstance(target, ast.Tuple) else [target]
                        names.update(leaf.id for leaf in leaves if isinstance(leaf, ast.Name))
        for inner in ast.walk(node):
            if isinstance(inner, ast.Attribute) and holds_config(inner.value):
                stop.fields.add(inner.attr)
                method = f"{CONFIG_CLASS[1]}.{inner.attr}"
                if method in self.modules[CONFIG_CLASS[0]].functions:
                    self.visit((CONFIG_CLASS[0], method), {"self"}, None)
            elif isinstance(inner, ast.Call):
                target = self.resolve(module, inner, cls)
                passed = self._passed(inner, target, holds_config)
                if target and (passed or self._on_self_holding_config(inner, self_class)):
                    enter(inner, target, passed)
                    stop.passes_on |= bool(passed)
            elif isinstance(inner, ast.Return) and holds_config(inner.value):
                stop.returns_config = True
        return stop.returns_config

    def _on_self_holding_config(self, call: ast.Call, self_class: tuple[str, str] | None) -> bool:
        """A call of ``self.method()`` or ``super().method()`` in a class whose instance
        holds the config as ``self.config`` (the method may read it there)."""
        func = call.func
        if not isinstance(func, ast.Attribute):
            return False
        owner = func.value
        on_self = (isinstance(owner, ast.Name) and owner.id == "self") or (
            isinstance(owner, ast.Call) and getattr(owner.func, "id", "") == "super"
        )
        return on_self and self_class in self.holders

    def _passed(self, call: ast.Call, target: tuple[str, str] | None, holds) -> set[str]:
        """The callee's parameter names that receive the config in this call."""
        if target is None:
            return set()
        node = self.modules[target[0]].functions[target[1]]
        params = [a.arg for a in node.args.posonlyargs + node.args.args]
        if "." in target[1] and params and params[0] == "self":
            params = params[1:]
        passed = set()
        for index, arg in enumerate(call.args):
            if holds(arg) and index < len(params):
                passed.add(params[index])
        for keyword in call.keywords:
            if keyword.arg and holds(keyword.value):
                passed.add(keyword.arg)
        return passed


def walk(root: Path = ROOT) -> dict:
    """The stops, rooms and returns of the config from ``Trainer.__init__`` in the
    checkout at ``root``."""
    modules = load_modules(root)
    walker = Walk(modules)
    walker.visit(START, {"config"}, None)
    # a function the config reached but that never reads it is no stop
    stops = [stop for stop in walker.stops.values() if stop.reads]
    rooms = sorted({stop.module for stop in stops})
    return {
        "start": ".".join(START),
        "stops": [
            {
                "where": f"{stop.module}:{stop.function}",
                "reads": sorted(stop.fields),
                "returns_config": stop.returns_config,
            }
            for stop in stops
        ],
        "rooms": rooms,
        "counts": {
            "stops": len(stops),
            "rooms": len(rooms),
            "returns": sum(stop.returns_config for stop in stops),
        },
    }


def main(argv: list[str] | None = None) -> int:
    """Prints the walk (or its JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the walk as JSON")
    parser.add_argument(
        "--source", type=Path, default=ROOT, help="the checkout to walk (default: this one)"
    )
    args = parser.parse_args(argv)
    result = walk(args.source)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    for stop in result["stops"]:
        back = " (returns the config)" if stop["returns_config"] else ""
        print(f"{stop['where']}{back}: {', '.join(stop['reads']) or 'passes it on'}")
    counts = result["counts"]
    print(
        f"\n{counts['stops']} stops in {counts['rooms']} rooms, {counts['returns']} returns: "
        + ", ".join(result["rooms"])
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

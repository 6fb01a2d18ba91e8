"""The package graph: no import cycle between files (imports inside
functions included), arrows one way between
the packages (docs/design.md, "Package map"), and no private name of one
package imported by another. Read from the source with `ast`: nothing is
imported."""

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "keras_txl")
# The `keras-txl` command: a package beside the library, above all of it.
COMMAND_PACKAGE = os.path.join(ROOT, "keras_txl_cli")

# Lower rank = lower layer. A package may import its own modules and
# packages of a lower rank; the packages of one rank do not import each
# other, except the `(importer, imported)` pairs in `SIDEWAYS` (none
# today).
RANKS = {
    "utils": 0,
    "layers": 1,
    "metrics": 1,
    "models": 2,
    "data": 3,
    "distribute": 3,
    "training": 3,
    "export": 3,
    "convert": 3,
    "ablation": 4,
}
SIDEWAYS = set()
# Imports inside a function allowed against the ranks, each with its
# reason: `(importing module, imported package)`. None today: the models
# find the converters' checkpoint loaders and the variants that old
# configs load as through registries that those packages fill when
# imported (`import keras_txl` imports them).
DEFERRED = set()
# Pairs `(importer, imported)` that rank alone would allow, with the reason
# they may not: strategies know no model class (docs/design.md), so that
# any model that carries a memory distributes the same way.
APART = {("distribute", "models")}
TOP_LEVEL = {"__init__", "__main__", "version"}


def _modules(package=PACKAGE):
    """`{dotted module name: path}` of every module of `package`."""
    modules = {}
    for folder, _, files in os.walk(package):
        for file in files:
            if not file.endswith(".py"):
                continue
            path = os.path.join(folder, file)
            parts = os.path.relpath(path, ROOT)[:-3].split(os.sep)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def _imports(path, module_level_only):
    """`[(imported module, imported names)]` of the keras_txl imports of
    a file; with `module_level_only`, those run at import time (not
    inside functions)."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
            )
            if isinstance(child, ast.ImportFrom) and child.module:
                if child.module.startswith("keras_txl") and not (
                    module_level_only and in_function
                ):
                    names = [alias.name for alias in child.names]
                    found.append((child.module, names))
            elif isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name.startswith("keras_txl") and not (
                        module_level_only and in_function
                    ):
                        found.append((alias.name, []))
            visit(child, inside)

    visit(tree, False)
    return found


def _targets(module, names, modules):
    """The modules an import loads: `from a.b import c` loads `a.b`, and
    `a.b.c` when that is a module, and the packages above them."""
    targets = [module] if module in modules else []
    targets += [f"{module}.{n}" for n in names if f"{module}.{n}" in modules]
    # Importing `a.b.c` first runs the `__init__` of `a` and `a.b`.
    parents = {
        ".".join(target.split(".")[:i])
        for target in targets
        for i in range(1, target.count(".") + 1)
    }
    return targets + sorted(parents & set(modules))


def _package(module):
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def test_every_package_has_a_rank():
    packages = {_package(m) for m in _modules()} - {None} - TOP_LEVEL
    assert packages <= set(RANKS), packages - set(RANKS)


def test_no_import_cycle_deferred_imports_included():
    modules = _modules()
    graph = {
        module: {
            target
            for imported, names in _imports(path, module_level_only=False)
            for target in _targets(imported, names, modules)
            # A module's own packages are initialising when it runs (an
            # import names them, but they are no dependency of it). A
            # package's `__init__` does run the modules it imports: a
            # module importing its package's `__init__` from a function is
            # a cycle through it.
            if not (target == module or module.startswith(target + "."))
        }
        for module, path in modules.items()
    }
    state = {}

    def walk(module, stack):
        state[module] = "open"
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                cycle = stack[stack.index(target) :] + [target]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if target not in state:
                walk(target, stack + [target])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            walk(module, [module])


def _expand(imports):
    """`from keras_txl import models` as an import of `keras_txl.models`."""
    for imported, names in imports:
        if imported == "keras_txl":
            for name in names:
                yield f"keras_txl.{name}", []
        else:
            yield imported, names


def test_arrows_point_one_way_and_nothing_private_crosses():
    wrong, private = [], []
    for module, path in _modules().items():
        source = _package(module)
        if source in TOP_LEVEL or source is None:
            continue
        at_import = {
            i for i, _ in _expand(_imports(path, module_level_only=True))
        }
        for imported, names in _expand(_imports(path, module_level_only=False)):
            target = _package(imported)
            if target is None or target == source:
                continue
            deferred = imported not in at_import and any(
                module == m and (imported + ".").startswith(p + ".")
                for m, p in DEFERRED
            )
            if (
                RANKS[target] >= RANKS[source]
                and (source, target) not in SIDEWAYS
                and not deferred
            ) or (source, target) in APART:
                wrong.append(f"{module} imports {imported}")
            private += [
                f"{module} imports {imported}.{name}"
                for name in names
                if name.startswith("_")
            ]
    assert not wrong, "arrows against the package map:\n" + "\n".join(wrong)
    assert not private, "private names across packages:\n" + "\n".join(private)


# The private names of Keras and keras-hub that the library uses, each
# listed with its reason in CONTRIBUTING.md ("Private APIs") and pinned
# by a test there: `{name: files that may use it}`.
PRIVATE_KERAS_USES = {
    "_flatten_layers": {"models/transformer_xl_backbone.py"},
    "_inbound_nodes": {"layers/adaptive_softmax.py"},
    "_keras_history": {"layers/adaptive_softmax.py"},
    "_use_tf_workflow": {"models/vocabulary_tokenizer.py"},
}


def _keras_private_names():
    """The private attributes (`_name`, not dunders) of the Keras and
    keras-hub classes the library subclasses or calls."""
    import keras
    import keras_hub

    bases = [
        keras.layers.Layer,
        keras.Model,
        keras.layers.Dropout,
        keras.callbacks.Callback,
        keras.metrics.Metric,
        keras.optimizers.Optimizer,
        keras.Variable,
        keras.random.SeedGenerator,
        keras_hub.models.Backbone,
        keras_hub.models.CausalLM,
        keras_hub.models.CausalLMPreprocessor,
        keras_hub.tokenizers.Tokenizer,
        keras_hub.samplers.Sampler,
    ]
    # Instance attributes too (`_tracker` is set in `Layer.__init__`).
    instances = [keras.layers.Dense(1), keras.Sequential(), keras.Variable(0)]
    instances.append(keras.optimizers.Adam())
    names = {name for obj in instances for name in vars(obj)}
    names.update(
        name for base in bases for cls in base.__mro__ for name in vars(cls)
    )
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def test_keras_private_names_only_where_contributing_lists_them():
    private = _keras_private_names()
    assert {"_tracker", "_clip_gradients", "_flatten_layers"} <= private
    found = {}
    for path in _modules().values():
        with open(path, encoding="utf-8") as file:
            tree = ast.parse(file.read())
        path = os.path.relpath(path, PACKAGE).replace(os.sep, "/")
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in private:
                found.setdefault(node.attr, set()).add(path)
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [getattr(node, "module", None) or ""]
                names += [a.name for a in node.names]
                assert not any(
                    n.startswith(("keras.src", "keras_hub.src")) for n in names
                ), f"{path} imports a private module of Keras or keras-hub"
    unlisted = {
        name: sorted(paths - PRIVATE_KERAS_USES.get(name, set()))
        for name, paths in found.items()
    }
    assert not {k: v for k, v in unlisted.items() if v}, (
        "private Keras/keras-hub names used where CONTRIBUTING.md does not "
        f"list them: {unlisted}"
    )


def test_no_command_module_imports_another():
    """What two `keras-txl` subcommands share lives in a module of its own
    (`keras_txl_cli/artifacts.py`, `text_segments.py`, ...), never in one
    command's file that another command imports."""
    modules = _modules(COMMAND_PACKAGE)
    commands = [m for m in modules if m.endswith("_command")]
    assert "keras_txl_cli.train_command" in commands
    borrowed = {
        command: sorted(
            target
            for imported, names in _imports(modules[command], False)
            for target in _targets(imported, names, modules)
            if target in commands and target != command
        )
        for command in commands
    }
    assert not {k: v for k, v in borrowed.items() if v}, borrowed


def _reads_argv(tree):
    """Whether a module reads `sys.argv` (or `sys.orig_argv`) outside an
    `if __name__ == "__main__":` block (a child process's own entry)."""
    main_blocks = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.If)
        and isinstance(node.test, ast.Compare)
        and isinstance(node.test.left, ast.Name)
        and node.test.left.id == "__name__"
    ]
    inside = {id(n) for block in main_blocks for n in ast.walk(block)}
    return any(
        isinstance(node, ast.Attribute)
        and node.attr in ("argv", "orig_argv")
        and id(node) not in inside
        for node in ast.walk(tree)
    )


def test_the_library_knows_nothing_of_its_command_line():
    """`keras_txl` imports nothing of `keras_txl_cli`, names it in no
    child process, and reads no `sys.argv`: the command owns its
    start-up. The one exception is `keras_txl/__main__.py`, which is
    `python -m keras_txl` (the command's old spelling) and which nothing
    imports."""
    assert "keras_txl_cli.cli" in _modules(COMMAND_PACKAGE)
    wrong = []
    for module, path in _modules().items():
        if module == "keras_txl.__main__":
            continue
        with open(path, encoding="utf-8") as file:
            source = file.read()
        tree = ast.parse(source)
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, (ast.List, ast.Tuple)):
                # `[python, "-m", "keras_txl", ...]`, a subprocess's
                # command: the command line by another road.
                words = [getattr(e, "value", None) for e in node.elts]
                names = [
                    f"-m {after}"
                    for before, after in zip(words, words[1:])
                    if before == "-m"
                    and after in ("keras_txl", "keras_txl_cli")
                ]
            wrong += [
                f"{module}: {name}"
                for name in names
                if name.startswith(("keras_txl_cli", "-m"))
            ]
        if _reads_argv(tree):
            wrong.append(f"{module}: reads sys.argv")
    assert not wrong, wrong

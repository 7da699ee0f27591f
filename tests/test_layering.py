"""The pure layer imports alone; the plugin loads only where fairseq is."""

import subprocess
import sys

from fairseq_helpers import BIN, REPO


def python(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)


def test_masking_imports_without_fairseq_or_torch():
    result = python("import fairseq_maskplug.masking, sys; "
                    "assert 'fairseq' not in sys.modules and 'torch' not in sys.modules, sorted(sys.modules)")
    assert result.returncode == 0, result.stderr


def test_retrieval_imports_without_fairseq_or_torch():
    """BM25 retrieval (fairseq-maskplug-retrieve) runs on machines without fairseq's weight."""
    result = python("import fairseq_maskplug.retrieval, preprocess.retrieve, sys; "
                    "assert 'fairseq' not in sys.modules and 'torch' not in sys.modules, sorted(sys.modules)")
    assert result.returncode == 0, result.stderr


def test_importing_the_package_after_fairseq_loads_the_plugin():
    """What fairseq's --user-dir and user plugins written as ``import fairseq_maskplug`` rely on."""
    result = python("import fairseq.tasks, fairseq_maskplug; from fairseq.tasks import TASK_REGISTRY; "
                    "assert {'guided_mlm', 'fe_mlm', 'joint_mlm_classification'} <= set(TASK_REGISTRY)")
    assert result.returncode == 0, result.stderr


def test_user_dir_helper_prints_only_the_directory():
    result = subprocess.run([str(BIN / "fairseq-maskplug-dir")], capture_output=True, text=True)
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout.strip() == str(REPO / "fairseq_maskplug")


def test_preprocessing_tools_are_console_commands_that_run_anywhere_and_show_defaults(tmp_path):
    for command, default in (("fairseq-maskplug-score-pll", "(default: plt)"),
                             ("fairseq-maskplug-binarize-side-info", "(default: float64)"),
                             ("fairseq-maskplug-annotate-importance", "(default: importance)"),
                             ("fairseq-maskplug-evaluate", "(default: test)"),
                             ("fairseq-maskplug-retrieve", "(default: 1.2)"),
                             ("fairseq-maskplug-convert", "(default: 0.0001)")):
        result = subprocess.run([str(BIN / command), "--help"], capture_output=True, text=True, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert default in " ".join(result.stdout.split()), (command, result.stdout)


# the layers of the design (docs/design.md, "Layers"): every folder of the package (and root module) is a layer of
# its own, in this order; a folder may import its own modules and the folders below it. common/ is below
# everything; integration/ (fairseq's patches) below the registrations; tools/ (what the commands share) below the
# producers; evaluation/ and commands/ at the commands' layer; compare/ (a command that runs the others) above them.
ORDER = ["_version", "common", "masking", "data", "integration", "models", "criterions", "weighting", "tasks", "plugin", "tools",
         "scoring", "retrieval", "interop", "hf", "hf_tracks", "evaluation", "demo", "commands", "compare", "__init__"]
LAYER = {name: layer for layer, name in enumerate(ORDER)}
OUTSIDE = {"preprocess", "recipes", "benchmarks", "tests"}  # layers 5 to 8: never imported by the package


def unit(path) -> str:
    """The layer unit of a file of the package: its folder, or its own name at the root."""
    parts = path.relative_to(REPO / "fairseq_maskplug").parts
    return parts[0] if len(parts) > 1 else parts[0][:-len(".py")]


def package_imports():
    """``(importing unit, imported unit, file)`` for every import of one unit of fairseq_maskplug by
    another (relative or absolute, at module level or inside a function), and of a folder outside it."""
    import ast

    root = REPO / "fairseq_maskplug"
    for path in root.rglob("*.py"):
        own, depth = unit(path), len(path.relative_to(root).parts) - 1
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                modules = [node.module or ""]
            elif isinstance(node, ast.ImportFrom) and node.level == depth + 1:  # relative to the package root
                modules = [f"fairseq_maskplug.{node.module}"] if node.module else \
                    [f"fairseq_maskplug.{alias.name}" for alias in node.names]
            else:
                continue  # within its own folder
            for module in modules:
                head, _, rest = module.partition(".")
                if head == "fairseq_maskplug" and rest:
                    target = rest.split(".")[0]
                elif head in OUTSIDE:
                    target = head
                else:
                    continue
                if target != own:
                    yield own, target, path.relative_to(REPO)


def test_every_folder_and_root_module_of_the_package_has_a_layer():
    units = {unit(path) for path in (REPO / "fairseq_maskplug").rglob("*.py")}
    assert units - set(LAYER) == set()


def test_no_layer_imports_a_layer_above_it():
    """common imports nothing else; masking only common; data only masking and common; tasks, criteria,
    models and weightings no producer (scoring/, retrieval/, interop/) and no command; no two folders import
    each other (each is a layer of its own): what two layers share lives in the lower one; and nothing in the
    package imports preprocess/, recipes/, benchmarks/ or tests/."""
    imports = list(package_imports())
    upward = [f"{path}: {own} imports {target}" for own, target, path in imports
              if target in OUTSIDE or LAYER[target] > LAYER[own]]
    assert upward == []
    seen = {(own, target) for own, target, _ in imports}  # the scan sees imports of every kind
    assert {("tasks", "data"), ("plugin", "integration"), ("masking", "common"), ("commands", "plugin")} <= seen


def test_common_imports_without_fairseq_or_torch():
    result = python("import fairseq_maskplug.common.atomic, fairseq_maskplug.common.progress, "
                    "fairseq_maskplug.common.option_ranges, fairseq_maskplug.common.metrics, sys; "
                    "assert 'fairseq' not in sys.modules and 'torch' not in sys.modules, sorted(sys.modules)")
    assert result.returncode == 0, result.stderr


def module_imports():
    """``{module: modules of ours it imports}`` for every module of fairseq_maskplug, of the producers'
    entry points (preprocess) and of the benchmarks (which import each other by their bare names, their folder on
    ``sys.path``), imports inside functions included (``from X import name``: the submodule ``X.name`` where there
    is one, else ``X``)."""
    import ast

    def name_of(path):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    modules = {name_of(path): path for root in ("fairseq_maskplug", "preprocess", "benchmarks")
               for path in (REPO / root).rglob("*.py")}
    graph = {}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([node.module] if node.module else []))
                names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                         for alias in node.names]
            else:
                continue
            for name in names:
                if module.startswith("benchmarks.") and f"benchmarks.{name.split('.')[0]}" in modules:
                    name = f"benchmarks.{name.split('.')[0]}"  # a benchmark's sibling, by its bare name
                while name and name not in modules:
                    name = name.rpartition(".")[0]
                if name and name != module:
                    targets.add(name)
        graph[module] = targets
    return graph


def import_circles(graph):
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index, low, on_stack, stack, circles, counter = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def test_no_import_circle_between_modules_of_the_package():
    """No module imports, through any chain of imports (inside functions included), a module that imports it:
    an import circle holds only while some import waits inside a function, and makes the import order (and
    with it the order of registrations) depend on which module a user imports first."""
    graph = module_imports()
    assert "fairseq_maskplug.masking.span_masks" in graph["fairseq_maskplug.masking.fully_explored"]
    assert "fairseq_maskplug.tools.producer" in graph["preprocess.difference"]  # the producers are read too
    assert "benchmarks.bench_collators" in graph["benchmarks.pages"]  # and the benchmarks (issue 91: no circle)
    assert import_circles(graph) == []
    planted = dict(graph, **{"fairseq_maskplug.masking.span_masks": {"fairseq_maskplug.masking.registry"}})
    assert import_circles(planted) == [["fairseq_maskplug.masking.fully_explored", "fairseq_maskplug.masking.registry",
                                        "fairseq_maskplug.masking.span_masks"]]


def test_every_task_is_assembled_from_at_most_four_classes_of_the_package():
    """Tasks combine parts (a policy, batch steps, a weighting) rather than long chains of mixins whose order
    matters (issue 40): no registered task has more than 4 classes of this package in its method resolution
    order, and every one derives from the one base whose train and valid steps run ``prepare_batch``."""
    import fairseq_maskplug.plugin  # noqa: F401
    from fairseq.tasks import TASK_REGISTRY
    from fairseq_maskplug.tasks import PackageTask

    ours = {name: [c.__name__ for c in cls.__mro__ if c.__module__.startswith("fairseq_maskplug.")]
            for name, cls in TASK_REGISTRY.items() if cls.__module__.startswith("fairseq_maskplug.")}
    assert len(ours) >= 9, sorted(ours)
    assert {name: chain for name, chain in ours.items() if len(chain) > 4} == {}
    assert all(issubclass(TASK_REGISTRY[name], PackageTask) for name in ours)
    assert all("train_step" not in vars(TASK_REGISTRY[name]) for name in ours), \
        "override optimization_step (or add a batch step), not train_step"

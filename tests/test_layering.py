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


# the layers of the design (../DESIGN.md, "Layers"): a package may import its own layer and the layers below
LAYER = {"masking": 1, "data": 2, "tasks": 3, "criterions": 3, "models": 3, "weighting": 3,
         "scoring": 4, "retrieval": 4, "interop": 4}


def package_imports():
    """``(importing package, imported package, file)`` for every import of one package of
    fairseq_maskplug by another (relative or absolute)."""
    import ast

    root = REPO / "fairseq_maskplug"
    for path in root.rglob("*.py"):
        parts = path.relative_to(root).parts
        if len(parts) < 2:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level == 0 and (node.module or "").startswith("fairseq_maskplug."):
                target = node.module.split(".")[1]
            elif node.level >= 2:
                target = node.module.split(".")[0] if node.module else node.names[0].name
            else:
                continue
            if target != parts[0]:
                yield parts[0], target, path.relative_to(REPO)


def test_no_layer_imports_a_layer_above_it():
    """masking imports no other layer; data only masking; tasks, criteria, models and weightings
    no producer (scoring/, retrieval/, interop/): what two layers share lives in the lower one."""
    upward = [f"{path}: {own} imports {target}" for own, target, path in package_imports()
              if own in LAYER and target in LAYER and LAYER[target] > LAYER[own]]
    assert upward == []
    assert any(own == "tasks" and target == "data" for own, target, _ in package_imports())  # the scan sees imports

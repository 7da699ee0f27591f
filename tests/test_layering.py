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

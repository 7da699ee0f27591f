"""``import fairseq_maskplug`` makes this package's checkpoints loadable whatever a script imported before it:
fairseq first (the plugin loads at once) or fairseq after (it loads when fairseq's import finishes). Each order
runs in a fresh process, as a user's script does; without the package, the same load fails (the check can fail)."""

import subprocess
import sys

import pytest

from fairseq_helpers import check, train

pytestmark = pytest.mark.e2e

LOAD = ("from fairseq import checkpoint_utils\n"
        "models, cfg, task = checkpoint_utils.load_model_ensemble_and_task([sys.argv[1]])\n"
        "print('loaded', type(task).__name__)\n")
ORDERS = {
    "package first": "import sys\nimport fairseq_maskplug\n" + LOAD,
    "fairseq first": "import sys\nimport fairseq\nimport fairseq_maskplug\n" + LOAD,
    "fairseq's submodule first": "import sys\nimport fairseq.checkpoint_utils\nimport fairseq_maskplug\n" + LOAD,
}


@pytest.fixture(scope="module")
def checkpoint(tiny_data, tmp_path_factory):
    save = tmp_path_factory.mktemp("import_order")
    check(train(tiny_data / "bin", save, "--mask-policy", "random", "--max-update", "2"))
    return save / "checkpoint_last.pt"


def load(code: str, checkpoint, tmp_path):
    return subprocess.run([sys.executable, "-c", code, str(checkpoint)], capture_output=True, text=True,
                          cwd=tmp_path)  # not the repository: the installed package, as a user's script


@pytest.mark.parametrize("order", sorted(ORDERS))
def test_a_checkpoint_loads_whichever_is_imported_first(checkpoint, tmp_path, order):
    result = load(ORDERS[order], checkpoint, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "loaded GuidedMLMTask" in result.stdout


def test_without_the_package_the_same_load_fails(checkpoint, tmp_path):
    result = load("import sys\n" + LOAD, checkpoint, tmp_path)
    assert result.returncode != 0 and "loaded" not in result.stdout


def test_the_package_alone_imports_no_fairseq(tmp_path):
    code = "import sys, fairseq_maskplug, fairseq_maskplug.masking\nprint(sorted({'fairseq', 'torch'} & set(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stderr[-2000:]

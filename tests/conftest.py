import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/ helpers
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # preprocess/, examples/

import subprocess_guard  # noqa: E402
from fairseq_helpers import preprocess, write_corpus  # noqa: E402
import fairseq_maskplug.plugin  # noqa: E402,F401  (tests build tasks in process)

_running = []  # the pytest item whose setup, call or teardown runs now


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _running.append(item)
    try:
        yield
    finally:
        _running.pop()


subprocess_guard.install(lambda: _running[-1] if _running else None)

#: each test file's seconds in the full tier (2026-12-02: 2 workers on 2 cores under load, --durations=0; about 1.7
#: times a quiet run's), the longest first. pytest-xdist hands out whole files (--dist loadfile) in collection
#: order (--no-loadscope-reorder, tests/run.sh), so the longest start first and no worker is left running one alone
#: at the end (longest processing time first: that run's wall time was 4,798 s for 8,890 s of tests, 353 s over an
#: even split). Files not listed follow, those with more tests first.
FILE_SECONDS = {
    "test_readme_demo.py": 2079, "test_benchmarks.py": 1376, "test_compare_command.py": 1004,
    "test_compatibility.py": 714, "test_fault_injection.py": 598, "test_offline_bundle.py": 452,
    "test_release_recipe.py": 449, "test_recipe_stages.py": 417, "test_gpu_science.py": 238,
    "test_statistics_mutations.py": 237, "test_ptw.py": 232, "test_data_parallel.py": 230,
    "test_learned_spans.py": 113, "test_hf_tracks.py": 96, "test_prepare_text.py": 91, "test_packaging.py": 60,
}


def pytest_collection_modifyitems(config, items):
    tests = Counter(item.path.name for item in items)
    items.sort(key=lambda item: (-FILE_SECONDS.get(item.path.name, 0), -tests[item.path.name]))  # stable: a file's
    # tests keep their order


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory):
    """Binarized tiny corpus: 300 train lines, 40 valid lines; the text files kept beside it."""
    root = tmp_path_factory.mktemp("tiny")
    write_corpus(root / "train.txt", 300, seed=1)
    write_corpus(root / "valid.txt", 40, seed=2)
    preprocess(root / "bin", root / "train.txt", root / "valid.txt")
    return root

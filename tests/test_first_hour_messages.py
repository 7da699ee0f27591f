"""What a new user's first hour showed (round four): a missing track names the command that writes it, a
missing optional dependency names its extra, the commands take one share of the cores unless
``OMP_NUM_THREADS`` says otherwise, and degenerate side information is warned about where it is written and
where it is read."""

import json
import logging
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from fairseq_helpers import BIN, check, one_line_error, run
from fairseq_maskplug.data import write_side_info
from fairseq_maskplug.data.side_info import SideInfoDataset, TrackSummary, degenerate_track
from fairseq_maskplug.tools.threads import choose_threads, default_threads, local_processes


# --- a missing track names its producer ---------------------------------------------------------------------


def _guided_task(data, *flags):
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(data), "--task", "guided_mlm", "--tokens-per-sample", "32", "--arch", "roberta_base", *flags])
    return tasks.setup_task(convert_namespace_to_omegaconf(args).task)


@pytest.mark.parametrize("flags, command", [
    (["--mask-policy", "pmi"], "write it for train, valid and this split with: fairseq-maskplug-pmi-units --data "
                               "{data} --splits train,valid"),
    (["--mask-policy", "ptw"], "with: for split in train valid; do fairseq-maskplug-pos-tags --data {data} --split "
                               "$split --text RAW_TEXT_OF_$split; done"),
    (["--mask-policy", "matched_random", "--matched-policy", "l3", "--mask-unit", "word"],
     "with: fairseq-maskplug-score-pll --checkpoint VANILLA_MLM_CHECKPOINT --data {data} --splits train,valid"),
    (["--mask-policy", "informask", "--informask-track", "rates"],
     "with: fairseq-maskplug-informask --data {data} --splits train,valid --name rates"),
    (["--mask-policy", "self_evolution", "--se-track", "hard"],
     "fairseq-maskplug-score-pll --metric unmasked --name hard --checkpoint MODEL_CHECKPOINT"),
])
def test_a_missing_track_names_the_command_that_writes_it(tiny_data, flags, command):
    """The policy's producer, with the data directory and split filled in (and ``--name`` for a renamed track);
    a wrapper (matched_random, --mask-unit word) names its inner policy's."""
    data = tiny_data / "bin"
    task = _guided_task(data, *flags)
    with pytest.raises(FileNotFoundError) as error:
        task.load_dataset("train")
    assert command.format(data=data) in str(error.value) and "not found" in str(error.value)


@pytest.mark.e2e
def test_the_training_command_names_it_in_one_line(tiny_data, tmp_path):
    from fairseq_helpers import CPU_RUN, TINY_ROBERTA

    result = run([BIN / "fairseq-maskplug-train", tiny_data / "bin", "--task", "guided_mlm", "--mask-policy", "pmi",
                  "--tokens-per-sample", "32", "--save-dir", tmp_path / "ck", *TINY_ROBERTA, *CPU_RUN])
    one_line_error(result, "side information 'pmi_units' for split", "fairseq-maskplug-pmi-units --data")


# --- an optional dependency that is missing names its extra ---------------------------------------------------


SPACY_HIDDEN = "import sys; sys.modules['spacy'] = None\n"  # as an environment without spaCy: import fails


@pytest.mark.parametrize("module", ["pos_tags", "salient_spans"])
def test_a_spacy_producer_without_spacy_stops_naming_the_extra(tiny_data, tmp_path, module):
    """In a process where spaCy cannot be imported, the producer's one line names ``.[spans]``, nothing is written
    (it was a raw ``ModuleNotFoundError`` in the salient-spans step of the own-data page)."""
    data = shutil.copytree(tiny_data / "bin", tmp_path / "bin")
    before = sorted(data.iterdir())
    code = (SPACY_HIDDEN + f"from fairseq_maskplug.preprocess import {module}\n"
            f"sys.exit({module}.main(['--data', {str(data)!r}, '--split', 'train', '--text', "
            f"{str(tiny_data / 'train.txt')!r}]))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 2, result.stderr[-2000:]
    error = result.stderr.strip().splitlines()
    assert len(error) == 1 and error[0].startswith("error: fairseq-maskplug-"), result.stderr[-2000:]
    assert "MASKPLUG_EXTRAS=spans bash recipes/setup_env.sh" in error[0] and "Traceback" not in result.stderr
    assert sorted(data.iterdir()) == before


def test_a_module_missing_under_another_name_is_named_by_its_distribution():
    """sentencepiece's model reader imports protobuf as ``google.protobuf``: a missing protobuf is named as the
    distribution to install, not as ``No module named 'google'``."""
    code = "import sys; sys.modules['google'] = None\n" \
           "from fairseq_maskplug.interop import import_transformers\nimport_transformers()"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "needs protobuf (imports as google.protobuf), which is not installed: the [hf] extra" in result.stderr


def test_the_hf_extra_is_named_the_same_way():
    from fairseq_maskplug.common.extras import MissingExtra, require_extra

    code = "import sys; sys.modules['transformers'] = None\n" \
           "from fairseq_maskplug.interop import import_transformers\nimport_transformers()"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert 'MissingExtra: the Hugging Face import and export needs transformers' in result.stderr
    assert "the [hf] extra; MASKPLUG_EXTRAS=hf bash recipes/setup_env.sh" in result.stderr
    assert issubclass(MissingExtra, ImportError)
    with pytest.raises(ValueError, match="unknown extra"):
        require_extra("nope", "x")


# --- threads ------------------------------------------------------------------------------------------------


def test_a_share_of_the_cores_per_process_and_of_those_other_work_leaves():
    assert default_threads(2, 1) == 2 and default_threads(16, 4) == 4 and default_threads(2, 4) == 1
    assert default_threads(2, 1, busy=1) == 1 and default_threads(8, 2, busy=4) == 2
    assert default_threads(2, 1, busy=9) == 1  # never 0
    from fairseq_maskplug.tools.threads import busy_cores, choice_line
    assert busy_cores(2, 4.3) == 2 and busy_cores(16, 0.6) == 1  # a load average is not a count of cores
    assert "load average 4.3 over the last minute, so about 2 of the 2 cores busy" in choice_line(1, 2, 1, 4.3)
    with pytest.raises(ValueError):
        default_threads(0, 1)
    assert local_processes({"LOCAL_WORLD_SIZE": "4"}) == 4
    assert local_processes({"SLURM_NTASKS_PER_NODE": "2(x3)"}) == 2 and local_processes({}) == 1


def test_omp_num_threads_wins_and_otherwise_the_choice_is_set_and_logged(caplog):
    environ = {"OMP_NUM_THREADS": "3"}
    assert choose_threads(environ) is None and environ == {"OMP_NUM_THREADS": "3"}
    # in a child without OMP_NUM_THREADS: torch's pool takes the chosen share, and the line says how to choose
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS",
                                                          "OPENBLAS_NUM_THREADS")}
    code = ("from fairseq_maskplug.tools.cli import configure_tool_output; configure_tool_output()\n"
            "import os, torch; print(torch.get_num_threads(), os.environ['OMP_NUM_THREADS'])")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    threads, exported = result.stdout.split()
    assert threads == exported and int(threads) >= 1, result.stderr
    assert f"torch threads per process: {threads} (" in result.stderr and "set OMP_NUM_THREADS" in result.stderr


# --- degenerate side information ----------------------------------------------------------------------------


def _track(tmp_path, rows, dtype="float64"):
    prefix = str(tmp_path / f"train.t{len(list(tmp_path.iterdir()))}")
    write_side_info(prefix, [np.append(row, 0) for row in rows], dtype)  # each line's </s> is 0
    return prefix


def test_a_constant_or_nearly_constant_track_is_named_and_an_informative_one_is_not(tmp_path):
    """</s> (0 in every track) does not count: 100% of the tokens important is constant."""
    everything = _track(tmp_path, [np.ones(5), np.ones(3)], "uint8")
    assert "every token has the value 1 (a constant track)" in degenerate_track(everything)
    summary = TrackSummary(SideInfoDataset(everything))
    assert (summary.count, summary.low, summary.high, summary.mean) == (8, 1, 1, 1)
    nearly = _track(tmp_path, [np.zeros(300), np.array([0.5])])
    assert "99.7% of the tokens have the value 0 (nearly constant)" in degenerate_track(nearly)
    informative = _track(tmp_path, [np.linspace(0, 1, 50)])
    assert degenerate_track(informative) == ""
    assert str(TrackSummary(SideInfoDataset(informative))) == "50 values, least 0, mean 0.5, largest 1"
    # chunks of the memory map: the same summary as one pass
    chunked = TrackSummary(SideInfoDataset(nearly), chunk=7)
    assert (chunked.count, chunked.at_low, chunked.at_high) == (301, 300, 1)


def test_a_producer_warns_in_its_summary_and_log_and_training_warns_at_load(tiny_data, tmp_path, caplog):
    """pmi-units with a lexicon no n-gram reaches: every word is its own unit, so the track is 1 at every token
    (whitespace words): the summary and the log say so; training that loads it warns again."""
    data = shutil.copytree(tiny_data / "bin", tmp_path / "bin")
    result = run([BIN / "fairseq-maskplug-pmi-units", "--data", data, "--min-count", "100000"])
    check(result)
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(summary["warnings"]) == 2 and "train.pmi_units.bin: every token has the value 1" in \
        summary["warnings"][0], summary
    assert "fairseq_maskplug.producers | warning: " in result.stderr
    task = _guided_task(data, "--mask-policy", "pmi")
    with caplog.at_level(logging.INFO, logger="fairseq_maskplug"):
        task.load_dataset("train")
    assert any("train.pmi_units.bin: every token has the value 1" in r.getMessage() and r.levelname == "WARNING"
               for r in caplog.records)
    assert any("side information 'pmi_units' of split 'train': " in r.getMessage() for r in caplog.records)


def test_a_producer_that_marks_all_or_none_of_the_tokens_warns(caplog):
    """score-importance marked 100% of the scored tokens important on the quickstart data, silently."""
    from fairseq_maskplug.tools.sharding import warn_if_all_or_none

    with caplog.at_level(logging.WARNING, logger="fairseq_maskplug.producers"):
        line = warn_if_all_or_none("d/train.importance", 1.0, "important")
        assert warn_if_all_or_none("d/train.importance", 0.5, "important") == ""
    assert line.startswith("d/train.importance.bin: 100.0% of the tokens decided on are important")
    assert [r.getMessage() for r in caplog.records] == [
        f"warning: {line} (expected at toy size? set MASKPLUG_EXPECT_DEGENERATE=1)"]
    assert warn_if_all_or_none("p", 0.001, "important").startswith("p.bin: 0.1% of the tokens")


def test_degenerate_output_said_to_be_expected_is_logged_as_information(tiny_data, tmp_path, caplog, monkeypatch):
    """MASKPLUG_EXPECT_DEGENERATE=1 (QUICK=1 sets it): the producer's line and training's line at load are INFO,
    naming the variable; the producer's summary still lists the line."""
    from fairseq_maskplug.tools.sharding import warn_if_all_or_none

    monkeypatch.setenv("MASKPLUG_EXPECT_DEGENERATE", "1")
    data = shutil.copytree(tiny_data / "bin", tmp_path / "bin")
    result = check(run([BIN / "fairseq-maskplug-pmi-units", "--data", data, "--min-count", "100000"]))
    assert "every token has the value 1" in json.loads(result.stdout.strip().splitlines()[-1])["warnings"][0]
    assert "fairseq_maskplug.producers | expected: " in result.stderr and "warning:" not in result.stderr
    with caplog.at_level(logging.INFO, logger="fairseq_maskplug"):
        line = warn_if_all_or_none("d/train.importance", 1.0, "important")
        _guided_task(data, "--mask-policy", "pmi").load_dataset("train")
    assert line.startswith("d/train.importance.bin: 100.0% of the tokens decided on are important")
    degenerate = [r for r in caplog.records if "every token has the value 1" in r.getMessage()
                  or "100.0% of the tokens decided on" in r.getMessage()]
    assert len(degenerate) == 2 and all(r.levelname == "INFO" and "MASKPLUG_EXPECT_DEGENERATE is set" in r.getMessage()
                                        for r in degenerate)


def test_a_shard_without_lines_says_so():
    """A rank logged "scored 0 lines ... (lines 1 to 0)"."""
    from fairseq_maskplug.tools.sharding import Shard, shard_lines_text

    assert shard_lines_text(Shard(2, 1, None), range(1024, 1500)) == "shard 1 of 2 (lines 1025 to 1500)"
    assert shard_lines_text(Shard(3, 2, None), range(300, 300)) == \
        "shard 2 of 3 (no lines: the split has fewer blocks of --shard-block-lines than shards)"
    assert shard_lines_text(Shard(3, 1, None), range(5, 9), "documents") == "shard 1 of 3 (documents 6 to 9)"
    assert shard_lines_text(Shard(9, 8, None), range(7, 7), "documents") == \
        "shard 8 of 9 (no documents: there are fewer documents than shards)"


# --- the recipes install only into the environment they made ------------------------------------------------------


def _setup(root, env):
    """``source recipes/setup_env.sh`` from a copy of the script in ``root`` (no network: every case here stops or
    uses an environment before pip)."""
    (root / "recipes").mkdir(exist_ok=True)
    shutil.copy(os.path.join(os.path.dirname(__file__), "..", "recipes", "setup_env.sh"), root / "recipes")
    clean = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "MASKPLUG_EXTRAS",
                                                                "MASKPLUG_CURRENT_PYTHON", "PYTHON")}
    return subprocess.run(["bash", "-c", "source recipes/setup_env.sh && echo SOURCED"], cwd=root, capture_output=True,
                          text=True, env=dict(clean, **env), timeout=120)


@pytest.mark.e2e  # sources setup_env.sh (it stops before pip here)
def test_the_recipes_never_install_into_an_environment_they_did_not_make(tmp_path):
    """Issue 106, item 4: an active environment where the plugin is installed is used as it is (no .venv made, no
    pip); one lacking an extra a recipe needs is named with the pip line, not installed into; a .venv the script did
    not make and without the plugin is refused in one line, left as it was."""
    active = tmp_path / "mine"
    active.mkdir()
    used = _setup(tmp_path, {"VIRTUAL_ENV": str(active), "PYTHON": sys.executable})
    assert used.returncode == 0 and "SOURCED" in used.stdout, used.stderr
    assert f"[setup] using the active environment ({active}), where fairseq_maskplug is installed: nothing " \
           "installed" in used.stdout
    assert not (tmp_path / ".venv").exists()
    lacking = _setup(tmp_path, {"VIRTUAL_ENV": str(active), "PYTHON": sys.executable, "MASKPLUG_EXTRAS": "test,nosuch"})
    assert lacking.returncode == 1 and "SOURCED" not in lacking.stdout
    error = lacking.stderr.strip().splitlines()
    assert len(error) == 1 and "has fairseq_maskplug but not the extra(s) nosuch," in error[0], lacking.stderr
    assert f'pip install -e "{tmp_path}[nosuch]"' in error[0] and not (tmp_path / ".venv").exists()
    # a .venv made otherwise (here without pip or the plugin): refused before pip, nothing written into it
    check(subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / ".venv")], capture_output=True,
                         text=True))
    before = sorted(p.name for p in (tmp_path / ".venv").iterdir())
    refused = _setup(tmp_path, {})
    assert refused.returncode == 1 and "SOURCED" not in refused.stdout
    error = refused.stderr.strip().splitlines()
    assert len(error) == 1 and "was not made by recipes/setup_env.sh and has no fairseq_maskplug" in error[0], error
    assert sorted(p.name for p in (tmp_path / ".venv").iterdir()) == before
    # run from a repository root, its own fairseq_maskplug/ folder does not count as the plugin installed there
    (tmp_path / "fairseq_maskplug").mkdir()
    (tmp_path / "fairseq_maskplug" / "__init__.py").write_text("")
    (tmp_path / "fairseq_maskplug" / "plugin.py").write_text("")
    refused = _setup(tmp_path, {})
    assert refused.returncode == 1 and "has no fairseq_maskplug" in refused.stderr, refused.stdout + refused.stderr
    assert sorted(p.name for p in (tmp_path / ".venv").iterdir()) == before

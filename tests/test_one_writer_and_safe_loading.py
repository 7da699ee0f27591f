"""The fourth fault round's cases: one writer per output (a second training into a save directory, a second
producer on a track, a lock left by a killed run), checkpoints that never run code and always name their file,
and checkpoints of torch's legacy format read wherever a zip checkpoint is."""

import os
import pickle
import re
import shutil
import signal
import subprocess
import time

import pytest
import torch

from fairseq_helpers import BIN, CPU_RUN, TINY_ROBERTA, check, one_line_error, run
from fairseq_maskplug.common.checkpoint_files import UnsafeCheckpointError, load_state
from fairseq_maskplug.common.locks import DIRECTORY_LOCK, OutputLock, OutputLocked
from test_salient_spans import SENTENCES, spm_data  # noqa: F401  (the fixture: sentencepiece data and its text)


def _train_args(data, save, *extra):
    return [BIN / "fairseq-maskplug-train", data, "--task", "guided_mlm", "--tokens-per-sample", "32",
            "--save-dir", save, *TINY_ROBERTA, *CPU_RUN, *extra]


def _wait_for_lock(path, process, seconds=120):
    """Until ``path`` names its holder (the run has its lock), or fail if ``process`` ends first."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if path.exists() and path.read_text().strip():
            return
        assert process.poll() is None, process.communicate()
        time.sleep(0.2)
    raise AssertionError(f"no lock at {path}")


# --- one writer per output ------------------------------------------------------------------------------------


def test_a_lock_is_exclusive_names_its_holder_and_is_taken_over_when_stale(tmp_path):
    target = tmp_path / "train.plt"
    with OutputLock(target, "first") as first:
        assert first.took_over is None
        with pytest.raises(OutputLocked, match=r"is being written by first \(pid \d+ on .*, started "):
            OutputLock(target, "second").__enter__()
    assert not (tmp_path / "train.plt.lock").exists()  # a normal end removes it
    # what a killed holder leaves: the file naming it, its lock free
    (tmp_path / "train.plt.lock").write_text('{"command": "killed", "pid": 1, "host": "h", "started": "t"}\n')
    with OutputLock(target, "third") as third:
        assert third.took_over == "killed (pid 1 on h, started t)"
    with OutputLock(tmp_path / "save", "a run", directory=True):
        assert (tmp_path / "save" / DIRECTORY_LOCK).exists()


@pytest.mark.e2e
@pytest.mark.full  # two trainings of 600 updates and one killed: about 30 s
def test_a_second_training_into_one_save_dir_is_refused_and_a_killed_one_s_lock_taken_over(tiny_data, tmp_path):
    """Both used to exit 0 and overwrite each other's checkpoints; now the second stops before any work naming the
    first, whose run ends with its own checkpoints; after kill -9 the next run takes the lock over, saying so."""
    save = tmp_path / "save"
    env = dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")
    first = subprocess.Popen([str(a) for a in _train_args(tiny_data / "bin", save, "--max-update", "600")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    _wait_for_lock(save / DIRECTORY_LOCK, first)
    second = run(_train_args(tiny_data / "bin", save, "--max-update", "5"), new_process=True)
    one_line_error(second, f"{save} is being written by fairseq-maskplug-train (pid {first.pid} on ")
    out, err = first.communicate(timeout=600)
    assert first.returncode == 0, err[-3000:]
    assert torch.load(save / "checkpoint_last.pt", weights_only=False)["optimizer_history"][-1]["num_updates"] == 600
    assert not (save / DIRECTORY_LOCK).exists()

    killed = subprocess.Popen([str(a) for a in _train_args(tiny_data / "bin", tmp_path / "killed", "--max-update",
                                                           "2000")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _wait_for_lock(tmp_path / "killed" / DIRECTORY_LOCK, killed)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    again = check(run(_train_args(tiny_data / "bin", tmp_path / "killed", "--max-update", "2"), new_process=True))
    assert f"took over the lock left by fairseq-maskplug-train (pid {killed.pid} on " in again.stdout + again.stderr


def test_a_second_producer_on_one_track_is_refused_before_any_work(tiny_data, tmp_path, capsys):
    from preprocess import pmi_units

    data = shutil.copytree(tiny_data / "bin", tmp_path / "bin")
    with OutputLock(data / "train.pmi_units", "another pmi-units"):  # (flock: a second open file conflicts)
        assert pmi_units.main(["--data", str(data), "--min-count", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "train.pmi_units is being written by another pmi-units (pid" in err[0], err
    assert not (data / "train.pmi_units.bin").exists()
    assert pmi_units.main(["--data", str(data), "--min-count", "1"]) == 0  # once it has ended
    assert not list(data.glob("*.lock"))


# --- checkpoints that never run code ----------------------------------------------------------------------------


class RunsCode:
    """Unpickling it would run a shell command that creates ``marker``."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def malicious_checkpoints(tmp_path):
    """The same object in torch's zip format, its legacy format and as a bare pickle; and the marker."""
    marker = tmp_path / "code-ran"
    state = {"model": {"w": torch.zeros(2)}, "payload": RunsCode(marker)}
    files = {"zip": tmp_path / "zip.pt", "legacy": tmp_path / "legacy.pt", "pickle": tmp_path / "bare.pt"}
    torch.save(state, files["zip"])
    torch.save(state, files["legacy"], _use_new_zipfile_serialization=False)
    with open(files["pickle"], "wb") as f:
        pickle.dump(state, f)
    return files, marker


def test_the_safe_loader_refuses_a_pickle_that_would_run_code_naming_the_file(tmp_path):
    from fairseq import checkpoint_utils

    import fairseq_maskplug.plugin  # noqa: F401  (its checked load_checkpoint_to_cpu)

    files, marker = malicious_checkpoints(tmp_path)
    for kind, path in files.items():
        for load in (load_state, checkpoint_utils.load_checkpoint_to_cpu):
            with pytest.raises(UnsafeCheckpointError) as error:
                load(str(path))
            message = str(error.value)
            assert message.startswith(f"checkpoint {path} holds objects that are not plain tensors and options")
            assert "weights_only" not in message and "\n" not in message
            # torch's formats name the function the pickle asked for; a bare pickle stops at its first opcode
            assert ("(it asks for posix.system)" if kind != "pickle" else "(Unsupported operand") in message, message
    assert not marker.exists()


@pytest.mark.e2e
def test_commands_given_such_a_checkpoint_stop_in_one_line(tiny_data, tmp_path):
    files, marker = malicious_checkpoints(tmp_path)
    result = run(_train_args(tiny_data / "bin", tmp_path / "ck", "--max-update", "1", "--finetune-from-model",
                             files["zip"]))
    one_line_error(result, f"checkpoint {files['zip']} holds objects that are not plain tensors")
    resume = tmp_path / "resume"
    resume.mkdir()
    shutil.copy(files["legacy"], resume / "checkpoint_last.pt")
    result = run(_train_args(tiny_data / "bin", resume, "--max-update", "1"))
    one_line_error(result, f"checkpoint {resume / 'checkpoint_last.pt'} holds objects that are not plain tensors")
    result = run([BIN / "fairseq-maskplug-evaluate-mlm", "--data", tiny_data / "bin", files["pickle"]])
    assert result.returncode == 2 and f"checkpoint {files['pickle']} holds objects" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and "weights_only" not in result.stderr
    assert not marker.exists()


# --- torch's legacy format ----------------------------------------------------------------------------------------


@pytest.mark.e2e
def test_a_legacy_format_checkpoint_resumes_and_gives_its_task_state_and_model_options(tiny_data, tmp_path):
    """fairseq's 2019 releases are in torch's legacy (non-zip) format; resume, show-examples --task-state and the
    release reader memory-mapped every checkpoint and failed on them."""
    from fairseq_maskplug.interop.release import read_model_args
    from preprocess import show_examples

    save = tmp_path / "save"
    check(run(_train_args(tiny_data / "bin", save, "--max-update", "2")))
    state = torch.load(save / "checkpoint_last.pt", weights_only=False)
    torch.save(state, save / "checkpoint_last.pt", _use_new_zipfile_serialization=False)
    assert load_state(str(save / "checkpoint_last.pt"))["optimizer_history"][-1]["num_updates"] == 2
    assert read_model_args(save / "checkpoint_last.pt").encoder_embed_dim == 32
    assert show_examples.main([str(tiny_data / "bin"), "--task", "guided_mlm", "--tokens-per-sample", "32", "-n",
                               "2", "--task-state", str(save / "checkpoint_last.pt")]) == 0
    resumed = check(run(_train_args(tiny_data / "bin", save, "--max-update", "4")))
    assert "Loaded checkpoint" in resumed.stdout + resumed.stderr and "@ 2 updates" in resumed.stdout


# --- damaged dictionaries and text named --------------------------------------------------------------------------


@pytest.mark.parametrize("lines, message", [
    (["a 5", "b 4", "a 3"], "line 3: 'a' is already an entry (line 1)"),
    (["a 5", "<unk> 4"], "line 2: '<unk>' is already an entry (the special symbols fairseq adds itself)"),
])
def test_a_duplicate_dictionary_entry_names_file_line_and_entry(tmp_path, lines, message):
    from fairseq_maskplug.data.dictionaries import load_dictionary
    from fairseq_maskplug.data.indexed_files import DamagedDataError

    (tmp_path / "dict.txt").write_text("\n".join(lines) + "\n")
    expected = f"dictionary {tmp_path / 'dict.txt'} is damaged: {message}"
    with pytest.raises(DamagedDataError, match=re.escape(expected)):
        load_dictionary(str(tmp_path))
    (tmp_path / "dict.txt").write_text("a 5\nb 4\na 3 #fairseq:overwrite\n")  # fairseq's own way to allow one
    assert len(load_dictionary(str(tmp_path))) == 4 + 3  # (fairseq then adds the entry again)


def test_prepare_text_names_the_file_line_and_byte_of_a_non_utf8_input(tmp_path, capsys):
    from preprocess import prepare_text

    good, bad = tmp_path / "good.txt", tmp_path / "bad.txt"
    good.write_text("a first text\n" * 5)
    bad.write_bytes(b"fine\nalso fine\ncaf\xe9 latin-1\n")
    assert prepare_text.main(["--out", str(tmp_path / "out"), "--unlabelled", "news", str(good), str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {bad}:3: not UTF-8 text (invalid continuation byte at byte 3 of the line, byte 18 of the "
                   "file)"], err
    assert not (tmp_path / "out").exists()


# --- lines of any length --------------------------------------------------------------------------------------------


def test_informask_counts_a_20000_token_line_in_pieces_under_a_memory_bound():
    """Its PMI step built a length x length matrix (and a triangle of pair keys) per line: 409 TiB for a
    2-million-word line. With pieces of at most 512 tokens, a 20,000-token line over 1,000 words peaks under 96 MB
    (measured 59 MB: the copies made while merging the corpus's ~500,000 distinct pairs, which the vocabulary
    bounds, not the line; one piece's 512 x 512 float64 matrices are 2 MB each; whole, the line's pair keys alone
    would take 1.6 GB)."""
    import tracemalloc

    import numpy as np

    from fairseq_maskplug.scoring.informask import CooccurrencePMI, line_windows, token_rates

    rng = np.random.default_rng(0)
    long_line = rng.integers(10, 1010, 20_000)
    lines = [long_line, rng.integers(10, 1010, 30)]
    tracemalloc.start()
    counts = CooccurrencePMI(lines, 1010)
    rates = token_rates(lines, counts, 0.15, 2, seed=1, default=0.15)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 96 * 2 ** 20, f"{peak / 2 ** 20:.0f} MB"
    assert counts.lines == 40 + 1 and np.all((rates >= 0) & (rates <= 1))
    assert [len(p) for p in line_windows(np.arange(1030), 512)] == [512, 512, 6]
    # a line within the window is one piece: the rates of short lines are what they were
    short = [rng.integers(10, 60, 12) for _ in range(20)]
    assert np.array_equal(token_rates(short, CooccurrencePMI(short, 60), 0.15, 3, 1, 0.15),
                          token_rates(short, CooccurrencePMI(short, 60, window=10 ** 6), 0.15, 3, 1, 0.15,
                                      window=10 ** 6))


def test_a_line_longer_than_spacy_takes_is_refused_naming_it_and_the_option(spm_data, tmp_path, capsys):
    """spaCy's own error (E088) came mid-run as a traceback naming no line."""
    from preprocess import pos_tags

    data = shutil.copytree(spm_data / "bin", tmp_path / "bin")
    longest = max(range(len(SENTENCES)), key=lambda i: len(SENTENCES[i]))
    limit = sorted({len(s) for s in SENTENCES})[-2]  # every line fits but the longest ones
    assert pos_tags.main(["--data", str(data), "--split", "train", "--text", str(spm_data / "train.txt"),
                          "--spacy-max-length", str(limit)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"line {longest + 1} has {len(SENTENCES[longest])} characters, more than " \
        f"--spacy-max-length {limit}" in err[0], err
    assert not list(data.glob("train.pos.*"))


def test_a_split_whose_end_is_zero_bytes_is_named_a_damaged_copy(tiny_data, tmp_path):
    """A copy cut short into a file of the full size (pre-allocated) reads as zeros: it was reported as the special
    symbol <s> that the text held literally."""
    from fairseq.data import Dictionary, data_utils

    from fairseq_maskplug.data.dictionaries import check_token_ids

    data = shutil.copytree(tiny_data / "bin", tmp_path / "bin")
    raw = bytearray((data / "train.bin").read_bytes())
    raw[len(raw) // 2:] = bytes(len(raw) - len(raw) // 2)
    (data / "train.bin").write_bytes(bytes(raw))
    dictionary = Dictionary.load(str(data / "dict.txt"))
    with pytest.raises(ValueError, match="the file holds only zero bytes: a copy cut short into a file of the full "
                                         "size"):
        check_token_ids(data_utils.load_indexed_dataset(str(data / "train"), dictionary), str(data / "train"),
                        dictionary)

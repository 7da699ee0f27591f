"""What a recipe shows while it runs: each stage says when it starts (with its log file), where it
is at every interval (fairseq's update and loss, or the log's last line) and when it ends."""

import json
import os
import subprocess

import pytest

from fairseq_helpers import BIN, REPO

RUN_STAGE = """
set -euo pipefail  # as the recipes run
source recipes/lib.sh
fake_training() {  # fairseq-like JSON records, one per second
    for update in 2 4 6; do
        record="{\\"epoch\\": 1, \\"loss\\": \\"3.2$update\\", \\"num_updates\\": \\"$update\\"}"
        echo "2026-01-01 | INFO | train_inner | $record"
        sleep 1
    done
}
stage fake "$WORK/fake.log" fake_training --max-update 10
stage fake "$WORK/fake.log" fake_training --max-update 10
logged_total() {  # no --max-update among the stage's arguments: the total fairseq logged
    echo "2026-01-01 | INFO | fairseq_cli.train | {'optimization': {'max_epoch': 0, 'max_update': 10}}"
    fake_training
}
stage logged "$WORK/logged.log" logged_total
stage broken "$WORK/broken.log" bash -c 'echo went wrong; exit 3' || echo "returned $?"
stage warned "$WORK/warned.log" bash -c 'echo "fairseq_maskplug.producers | warning: t.bin: every token has the value 1"'
hinted() {  # fairseq's import-time hint is never the progress shown
    echo "preparing the data"
    echo "2026-01-01 | INFO | fairseq.tasks.text_to_speech | Please install tensorboardX: pip install tensorboardX"
    sleep 3
}
stage hinted "$WORK/hinted.log" hinted
quick_note
"""


@pytest.mark.e2e  # it sources recipes/lib.sh (no training)
def test_a_stage_reports_start_progress_end_and_failure(tmp_path):
    env = dict(os.environ, MASKPLUG_ROOT=str(REPO), MASKPLUG_WORK=str(tmp_path), MASKPLUG_PROGRESS_SECONDS="1",
               OMP_NUM_THREADS="1", PATH=f"{BIN}:{os.environ['PATH']}")
    result = subprocess.run(["bash", "-c", RUN_STAGE], capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    out = result.stdout.splitlines()
    assert out[0].startswith("    [fake] started ") and out[0].endswith(f"log: {tmp_path}/fake.log"), out
    progress = [line for line in out if line.startswith("    [fake] ") and " s: update " in line]
    assert progress and all(", loss 3.2" in line and "/10" in line and "s left" in line for line in progress), out
    assert any(line.startswith("    [fake] finished in ") for line in out)
    assert "    done before: fake" in out  # the second call: finished before
    assert any(line.startswith("    [logged] ") and "/10, loss 3.2" in line for line in out), out
    assert "went wrong" in result.stdout and "returned 1" in result.stdout
    assert "stage broken failed after " in result.stderr and f"full log: {tmp_path}/broken.log" in result.stderr
    assert any(line.startswith("    [hinted] ") and line.endswith(" s: preparing the data") for line in out), out
    assert not any("tensorboardX" in line for line in out)
    # a producer's warning shows as its stage ends, and under the tables (a stage whose log has none: nothing)
    assert "    [warned] warning: t.bin: every token has the value 1" in out
    assert sum("warning" in line for line in out) == 1 + 1, out
    assert out[-1] == f"note: 1 producer warning(s) about degenerate side information, which the rows that read " \
                      f"it inherit: {tmp_path}/warnings.txt"


RACE = """
set -euo pipefail
source recipes/lib.sh
built() { echo built >> "$WORK/built.txt"; sleep 15; }
stage shared "$WORK/shared.log" built
"""


@pytest.mark.e2e  # it sources recipes/lib.sh (no training)
@pytest.mark.full  # mostly a 15-second stage held while a second recipe waits for it
def test_two_recipes_running_one_stage_at_once_build_it_once_the_second_waiting(tmp_path):
    """Issue 104, item 2: two recipes needing one shared stage at once (two ``compare.sh`` and the general model):
    the second waits for the first, says so in one line, and finds the stage done; a lock left by a killed run
    (its holder ended) is taken over."""
    env = dict(os.environ, MASKPLUG_ROOT=str(REPO), MASKPLUG_WORK=str(tmp_path), OMP_NUM_THREADS="1")
    first = subprocess.Popen(["bash", "-c", RACE], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                             cwd=REPO)
    import time

    waited = time.monotonic()
    while not (tmp_path / ".locks" / "shared" / "pid").exists() and time.monotonic() - waited < 60:
        time.sleep(0.1)
    second = subprocess.run(["bash", "-c", RACE], capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert first.wait(timeout=120) == 0 and second.returncode == 0, second.stderr
    assert (tmp_path / "built.txt").read_text() == "built\n"  # built once
    said = second.stdout.splitlines()
    assert sum("another run (pid " in line and "is running this stage: waiting for it to end" in line
               for line in said) == 1, said
    assert said[-1] == "    done meanwhile by another run: shared", said
    assert not (tmp_path / ".locks" / "shared").exists()
    # a lock whose holder has ended (a killed run): taken over, the stage runs
    (tmp_path / ".locks" / "again").mkdir(parents=True)
    ended = subprocess.Popen(["true"])
    ended.wait()
    (tmp_path / ".locks" / "again" / "pid").write_text(f"{ended.pid}\n")
    again = subprocess.run(["bash", "-c", RACE.replace('stage shared "$WORK/shared.log" built', 'stage again "$WORK/again.log" true')], capture_output=True,
                           text=True, env=env, cwd=REPO, timeout=120)
    assert again.returncode == 0 and "waiting" not in again.stdout and "[again] finished in" in again.stdout


@pytest.mark.e2e
@pytest.mark.full
def test_quick_quickstart_runs_every_stage_and_says_it_is_a_smoke_run(tmp_path):
    from release_helpers import fake_demo_sources

    # as large as QUICK keeps of the real sources: 1,500 review lines (30 valid), 1,500 MR sentences (150 valid),
    # 3,000 news sentences (60 valid: enough blocks for the BART page's salient-span run, which the HF page exports)
    fake_demo_sources(tmp_path / "downloads", mr=1500, reviews=400, articles=500)
    env = dict(os.environ, QUICK="1", MASKPLUG_WORK=str(tmp_path / "work_quick"), MASKPLUG_EXTRAS="test",
               MASKPLUG_DOWNLOADS=str(tmp_path / "downloads"), MASKPLUG_PROGRESS_SECONDS="5", PYTHONWARNINGS="ignore",
               MASKPLUG_VOCAB_SIZE="100")
    result = subprocess.run(["bash", str(REPO / "recipes" / "quickstart.sh")], capture_output=True, text=True,
                            env=env, cwd=REPO, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    started = [line.split("]")[0].strip(" [") for line in out.splitlines() if "] started " in line]
    finished = [line.split("]")[0].strip(" [") for line in out.splitlines() if "] finished in " in line]
    assert started == finished and "sm_tagger" in started and "sm_taskpt_selective" in started, out
    for row in ("no-TaskPT", "matched-random", "selective"):
        assert f"| {row} | 1 | " in out
    assert "QUICK=1: a smoke run at toy size" in out
    assert "in-domain valid MLM loss on one fixed set of random masks" in out
    plot = (tmp_path / "work_quick" / "selective" / "results" / "finetune_valid_accuracy.svg").read_text()
    assert [f'data-run="{row}"' in plot for row in ("no-TaskPT", "matched-random", "selective")] == [True] * 3

    # the README's First steps, as written, after this run: W=work_quick, as the preamble's comment says
    from test_readme import AFTER_QUICKSTART, FIRST_STEPS, PREAMBLE, run_readme_block

    assert "--layers" not in PREAMBLE and "W=work " in PREAMBLE
    preamble = PREAMBLE.replace("W=work ", "W=work_quick ", 1)
    assert "--encoder-embed-dim 64 " in (tmp_path / "work_quick" / "first-steps.args").read_text()
    for line, body in FIRST_STEPS:
        run_readme_block(tmp_path, line, body, preamble)

    # the Hugging Face page on this run's model, top to bottom (its install line: tests/test_packaging.py): the
    # export with its tokenizer, the five-line script, the BART of the salient-span step (the quick route's
    # $W/first-steps/ssm, made by the BART page's block) exported and generating as fairseq does, the Trainer
    # with a policy's collator; then raw text through HF gives fairseq's ids and logits, in any case
    ssm_and_hf_page = AFTER_QUICKSTART[len(FIRST_STEPS):]
    assert len(ssm_and_hf_page) == 1 + 5 and "first-steps/ssm" in ssm_and_hf_page[0][1]
    (tmp_path / "examples").symlink_to(REPO / "examples")  # the page runs examples/hf_trainer.py from the root
    for line, body in ssm_and_hf_page:
        run_readme_block(tmp_path, line, body, preamble)
    assert_hf_export_gives_fairseq_logits(tmp_path / "work_quick")

    # issue 100's renamed-lexicon shape as one command, on this run's data and model: the low-resource copy, then
    # the renamed task and reviews (20 words). This toy task's label-bearing word types all occur in its 400 train
    # sentences, so no test item holds an unseen pseudo-word: the command says so in one line before writing
    # anything and before any unit of the plan runs (the plan ran at full size:
    # docs/results/compare_lexicon_cpu_2026-12-06.json)
    work = tmp_path / "work_quick"
    general = {p.name: p.stat().st_mtime_ns for p in (work / "data" / "general").iterdir()}
    result = subprocess.run(["bash", str(REPO / "recipes" / "compare.sh"), "lexicon", "1"], capture_output=True,
                            text=True, cwd=REPO, timeout=900, env={**env, "MASKPLUG_CURRENT_PYTHON": "1", "LEXICON_WORDS": "20"})
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert "no test item holds a pseudo-word that its train split never holds" in result.stdout + result.stderr
    assert (work / "data" / "mr-400" / "subset.json").is_file() and not (work / "data" / "lexicon").exists()
    assert not (work / "compare_plans" / "lexicon").exists()
    assert {p.name: p.stat().st_mtime_ns for p in (work / "data" / "general").iterdir()} == general


def assert_hf_export_gives_fairseq_logits(work):
    import torch

    from test_hf_export import fairseq_model, reference_ids
    from fairseq_maskplug.interop import import_transformers
    transformers = import_transformers()
    tokenizer = transformers.AutoTokenizer.from_pretrained(work / "hf" / "general")
    hf = transformers.AutoModelForMaskedLM.from_pretrained(work / "hf" / "general").eval()
    fs = fairseq_model(work / "general" / "checkpoint_last.pt")
    expected = reference_ids(work / "data" / "spm.model", work / "data" / "general" / "dict.txt")
    # the demo's text was lower-cased: its tokenizer lower-cases raw text as the data was (spm.text.json)
    assert tokenizer("This Movie")["input_ids"] == tokenizer("this movie")["input_ids"] == expected("this movie")
    for text in ("The film's plot wasn't great, but the actors were superb!", "  naïve café, 日本語 and 🙂",
                 "it is a <mask> movie"):
        ids = tokenizer(text, return_tensors="pt")["input_ids"]
        if "<mask>" not in text:  # sentencepiece spells a written <mask> out; the HF tokenizer reads the token
            assert ids[0].tolist() == expected(text)
        with torch.no_grad():
            assert (hf(input_ids=ids).logits - fs(ids)[0]).abs().max().item() <= 1e-5


def test_results_table_notes_constant_predictors_and_identical_rows(tmp_path):
    def write(row, split, accuracy, f1, predicted):
        (tmp_path / f"{row}__seed1.{split}.json").write_text(json.dumps(
            {"accuracy": accuracy, "macro_f1": f1, "units": "percent", "classes_predicted": predicted}))

    for row in ("a", "b"):
        for split in ("valid", "test"):
            write(row, split, 50.5, 33.6, 1)
    table = subprocess.run([BIN / "python", REPO / "recipes" / "results_table.py", tmp_path, "--rows", "a,b"],
                           capture_output=True, text=True, check=True).stdout.splitlines()
    assert table[-2].startswith("note: a, b predicted a single class on test (a constant predictor")
    assert table[-1] == "note: every row has the same test scores: the table does not separate the methods"
    write("b", "test", 61.0, 60.2, 2)
    table = subprocess.run([BIN / "python", REPO / "recipes" / "results_table.py", tmp_path, "--rows", "a,b"],
                           capture_output=True, text=True, check=True).stdout.splitlines()
    assert table[-1].startswith("note: a predicted a single class") and table[-2].startswith("| b | 1 |")

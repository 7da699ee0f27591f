"""A recipe end to end from a released fairseq model with GPT-2 BPE data (PRETRAINED, GPT2_BPE, LAUNCH).

The "release" is made here as fairseq publishes them (random tiny RoBERTa, ``model.pt`` with
``args``, a ``dict.txt`` of GPT-2 labels, a hand-learned byte-level ``encoder.json`` /
``vocab.bpe``), and the demo sources are generated text at the archive paths
``prepare_demo`` reads from its download cache, so that nothing is fetched. Quick tier: the demo
data encoded with the release's BPE, PLT scoring, BART and TLM data preparation on it. Full tier:
the selective-masking recipe from the release, every fairseq-train under
``LAUNCH="torchrun ... --nproc-per-node 2"`` (two CPU workers), and what reads its outputs.
"""

import json
import os
import re
import subprocess

import numpy as np
import pytest
from fairseq.data import Dictionary
from fairseq.data.encoders.gpt2_bpe_utils import get_encoder

from fairseq_helpers import BIN, REPO, check, run
from release_helpers import fake_demo_sources, make_release, mr_sentences, news_text



def tiny_release(directory):
    return make_release(directory, [t for _, t in mr_sentences(400, 1)] + news_text(200, 2) +
                        ["review 1 line 2 : the film felt dull to me ."])


@pytest.fixture(scope="module")
def release_data(tmp_path_factory):
    """The release and the demo data prepared with its GPT-2 BPE and dict.txt (the recipe's first
    stage, without its training): ``(release, work)``."""
    root = tmp_path_factory.mktemp("release_data")
    work = root / "work"
    fake_demo_sources(work / "downloads")
    release = tiny_release(root / "tiny_release")
    check(run([BIN / "python", "-m", "preprocess.prepare_demo", "--out", work / "data", "--cache", work / "downloads",
               "--gpt2-bpe", release, "--srcdict", release / "dict.txt"]))
    return release, work


@pytest.fixture(scope="module")
def recipe(tmp_path_factory):
    root = tmp_path_factory.mktemp("release")
    work = root / "work"
    fake_demo_sources(work / "downloads")
    release = tiny_release(root / "tiny_release")
    env = dict(os.environ, PYTHONWARNINGS="ignore", PRETRAINED=str(release), MASKPLUG_WORK=str(work),
               MASKPLUG_EXTRAS="test", MASKPLUG_BATCH="16", MASKPLUG_TOKENS="64", SM_TASKPT_UPDATES="6",
               SM_FINETUNE_EPOCHS="1", SM_TAGGER_EPOCHS="1", MASKPLUG_WORKERS="2",
               LAUNCH="torchrun --standalone --nnodes 1 --nproc-per-node 2")
    result = subprocess.run(["bash", str(REPO / "recipes" / "selective_masking.sh")], capture_output=True,
                            text=True, env=env, cwd=REPO)
    return release, work, result


@pytest.mark.e2e
@pytest.mark.full
def test_selective_recipe_runs_from_the_release_on_two_workers(recipe):
    release, work, result = recipe
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert f"released model {release}/model.pt: --arch roberta_base --encoder-layers 2" in result.stdout
    assert re.search(r"\| selective \| 1 \| [\d.]+ \| [\d.]+ \| [\d.]+ \|", result.stdout)
    assert not (work / "general").exists()  # no general stage
    ft_log = (work / "logs" / "sm_ft_no-TaskPT__seed1.log").read_text()
    assert f"loading pretrained model from {release}/model.pt" in ft_log
    for log in ("sm_ft_no-TaskPT__seed1", "sm_tagger", "sm_taskpt_selective"):
        text = (work / "logs" / f"{log}.log").read_text()
        assert "'distributed_world_size': 2" in text and "'distributed_init_method': 'env://'" in text, log
    # the tagger's In-domain Mask drove TaskPT: masks were made
    taskpt = (work / "logs" / "sm_taskpt_selective.log").read_text()
    valid = [json.loads(l.split("| valid | ", 1)[1]) for l in taskpt.splitlines() if "| valid | " in l]
    assert float(valid[-1]["valid_mask_rate"]) > 0


def test_data_is_the_release_s_gpt2_bpe_encoding(release_data):
    release, work = release_data
    data = work / "data"
    assert (data / "dict.txt").read_text() == (release / "dict.txt").read_text()
    assert not (data / "spm.model").exists()
    bpe = get_encoder(str(release / "encoder.json"), str(release / "vocab.bpe"))
    texts = {t for _, t in mr_sentences(400, 1)}
    lines = (data / "text" / "mr.train.tok").read_text().splitlines()
    assert len(lines) == 320
    assert all(bpe.decode([int(x) for x in line.split()]) in texts for line in lines)
    # the binarized data holds no <unk>: every label is in the release's dictionary
    d = Dictionary.load(str(data / "dict.txt"))
    from fairseq.data import data_utils
    tokens = data_utils.load_indexed_dataset(str(data / "indomain" / "train"), d)
    assert all(not (tokens[i] == d.unk()).any() for i in range(len(tokens)))


@pytest.mark.e2e
@pytest.mark.full
def test_the_recipe_s_previews_read_as_text(recipe):
    """GPT-2 labels were turned back into words in the Downstream Mask's preview."""
    _, work, result = recipe
    assert result.returncode == 0
    preview = (work / "data" / "mr" / "input0" / "train.importance.preview.txt").read_text()
    assert "the" in preview and not re.search(r"\[\d+\]", preview)


@pytest.mark.full  # PLT scoring and spaCy over the release's BPE: about 30 s
def test_pll_scores_and_salient_spans_on_the_release_s_bpe(release_data, tmp_path):
    release, work = release_data
    bpe = ["--gpt2-encoder-json", release / "encoder.json", "--gpt2-vocab-bpe", release / "vocab.bpe"]
    scored = check(run([BIN / "python", "-m", "preprocess.score_pll", "--checkpoint", release / "model.pt",
                        "--data", work / "data" / "mr" / "input0", "--split", "valid", "--name", "plt_try",
                        "--word-starts", "gpt2", *bpe]))
    assert "scored 40 lines" in scored.stdout
    from fairseq_maskplug.data import SideInfoDataset
    track = SideInfoDataset(str(work / "data" / "mr" / "input0" / "valid.plt_try"))
    values = np.concatenate([track[i].numpy() for i in range(len(track))])
    assert len(track) == 40 and np.all((values >= 0) & (values <= 1)) and values.max() > 0
    check(run([BIN / "python", "-m", "preprocess.prepare_bart_data", "--out", tmp_path / "bart",
               "--cache", work / "downloads", "--sentences", "0", "--heldout", "10", "--seen", "10",
               "--probe-train", "40", "--probe-valid", "10", "--max-question-tokens", "60",
               "--gpt2-bpe", release, "--srcdict", release / "dict.txt"]))
    spans = json.loads((tmp_path / "bart" / "manifest.json").read_text())["salient_spans"]["train"]
    # every generated news sentence names people, places or organisations, and a date
    assert spans["share_of_lines_without_span"] == 0 and spans["spans"] >= 3 * spans["lines"]


@pytest.mark.e2e
@pytest.mark.full
def test_fine_tuned_classifier_exports_to_hugging_face_with_the_same_accuracy(recipe, tmp_path):
    from fairseq_maskplug.interop import import_transformers
    try:
        transformers = import_transformers()
    except ImportError as error:  # the [hf] extra is optional; CI installs it
        pytest.skip(f"Hugging Face extra not installed ({error})")
    import torch

    release, work, _ = recipe
    checkpoint = work / "selective" / "finetune" / "no-TaskPT__seed1" / "checkpoint_best.pt"
    check(run([BIN / "python", "-m", "preprocess.convert", "--from-fairseq", checkpoint, "--gpt2-bpe", release,
               "--to", "hf", tmp_path / "hf"]))
    model = transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path / "hf").eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    assert model.config.id2label == {0: "negative", 1: "positive"}
    bpe = get_encoder(str(release / "encoder.json"), str(release / "vocab.bpe"))
    texts = [bpe.decode([int(x) for x in line.split()])
             for line in (work / "data" / "text" / "mr.valid.tok").read_text().splitlines()]
    labels = (work / "data" / "text" / "mr.valid.label").read_text().split()
    from fairseq import checkpoint_utils
    from fairseq.data import data_utils

    from fairseq_maskplug.integration.compat import allow_fairseq_checkpoint_globals
    allow_fairseq_checkpoint_globals()
    (fs_model,), _, task = checkpoint_utils.load_model_ensemble_and_task([str(checkpoint)])
    fs_tokens = data_utils.load_indexed_dataset(str(work / "data" / "mr" / "input0" / "valid"), task.source_dictionary)
    worst, predicted = 0.0, []
    with torch.no_grad():
        for i, text in enumerate(texts):
            ids = tokenizer(text, return_tensors="pt")["input_ids"]
            # the binarized line is </s>-terminated; sentence_prediction prepends <s>
            assert ids[0].tolist() == [0] + fs_tokens[i].tolist()
            hf_logits = model(input_ids=ids).logits
            fs_logits = fs_model.eval()(ids, features_only=True, classification_head_name="sentence_classification_head")[0]
            worst = max(worst, (hf_logits - fs_logits).abs().max().item())
            predicted.append(model.config.id2label[int(hf_logits.argmax())])
    assert worst <= 1e-5
    accuracy = 100 * np.mean([p == g for p, g in zip(predicted, labels)])
    fairseq_accuracy = json.loads((work / "selective" / "results" / "no-TaskPT__seed1.valid.json").read_text())
    assert accuracy == pytest.approx(fairseq_accuracy["accuracy"], abs=1e-9)


def test_tlm_corpus_reads_the_gpt2_bpe_demo_data(release_data, tmp_path):
    _, work = release_data
    check(run([BIN / "python", "-m", "preprocess.prepare_tlm_data", "corpus", "--demo", work / "data",
               "--out", tmp_path / "tlm"]))
    queries = (tmp_path / "tlm" / "corpus" / "queries.txt").read_text().splitlines()
    assert len(queries) == 320 and set(queries) <= {t for _, t in mr_sentences(400, 1)}

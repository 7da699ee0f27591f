"""Models trained here leave for Hugging Face with their tokenizer, and BART comes back (preprocess/convert.py).

A unigram sentencepiece model is trained on generated sentences with accents, CJK, emoji and runs
of spaces (``train_sentencepiece``, as ``prepare_demo`` does), the data written as its pieces with
``write_fairseq_dict``'s dictionary and binarized by real ``fairseq-preprocess``; a tiny RoBERTa
(``guided_mlm``) and a tiny BART (``guided_denoising``) train a few real updates on it. The
reference for "the ids fairseq was trained on" is sentencepiece's own pieces looked up in
``dict.txt``, and for the logits fairseq's own model. Quick tier: the tokenizer alone against
sentencepiece on 2,000 random strings; full tier: the trained models' exports.
"""

import os
import random
from pathlib import Path

import pytest
import torch

from fairseq_helpers import BIN, CPU_RUN, REPO, TINY_BART, TINY_ROBERTA, check, run, transformers_or_skip


transformers = transformers_or_skip()

WORDS = ("the movie was great film plot actors superb boring Paris 1999 3.14 don't naïve café résumé Ünïcödé "
         "wörds émojis 🙂 日本語 テキスト 中文 (yes) [no] \"quoted\" $5 50% e-mail ﬁne ①").split()
# characters the sentencepiece model has never seen (-> <unk>), full-width and compatibility forms (NFKC)
ODD = "abcdeéèüñß漢字日本語🙂👍 \t\u3000\u00a0ｆｕｌｌ①.,!?'\"-ABCD👾ǅ"


def sentences(n: int, seed: int):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12)))
        if rng.random() < 0.2:
            text = "  " + text + "  "
        out.append(text.replace(" ", "\t", 1) if rng.random() < 0.1 else text)
    return out


def odd_strings(n: int, seed: int):
    rng = random.Random(seed)
    return ["".join(rng.choice(ODD) for _ in range(rng.randint(0, 30))) for _ in range(n)]


def binarized_sentencepiece(root: Path, text, train_lines: int, vocab_size: int = 80):
    """``(spm.model, root/data)``: a unigram model of ``text`` (as ``prepare_demo`` trains one), its pieces with
    ``write_fairseq_dict``'s dictionary (``root/dict.txt``), the first ``train_lines`` lines the train split and
    the rest the valid split, binarized by real fairseq-preprocess with that dictionary."""
    from fairseq_maskplug.tools.binarize import encode, train_sentencepiece, write_fairseq_dict

    model = train_sentencepiece(text, root / "spm", vocab_size)
    pieces = encode(model, text, "train")
    write_fairseq_dict(model, pieces, root / "dict.txt")
    for split, rows in (("train", pieces[:train_lines]), ("valid", pieces[train_lines:])):
        (root / f"{split}.tok").write_text("\n".join(rows) + "\n", encoding="utf-8")
    data = root / "data"
    check(run([BIN / "fairseq-preprocess", "--only-source", "--srcdict", root / "dict.txt", "--trainpref",
               root / "train.tok", "--validpref", root / "valid.tok", "--destdir", data, "--workers", "1"]))
    return model, data


@pytest.fixture(scope="module")
def sp_data(tmp_path_factory):
    """``(root, spm.model, dict.txt, data dir)``: sentencepiece data binarized as the demo's is."""
    root = tmp_path_factory.mktemp("sp")
    model, data = binarized_sentencepiece(root, sentences(600, 0), 560)
    return root, model, root / "dict.txt", data


def reference_ids(model: Path, dict_path: Path):
    from fairseq.data import Dictionary

    from fairseq_maskplug.interop.tokenizer import sentencepiece_ids
    dictionary = Dictionary.load(str(dict_path))
    dictionary.add_symbol("<mask>")
    return lambda text: sentencepiece_ids(model, dictionary, text)


def test_sentencepiece_tokenizer_gives_fairseqs_ids_on_2000_strings(sp_data):
    from fairseq_maskplug.interop.gpt2_vocab import read_dict_symbols
    from fairseq_maskplug.interop.tokenizer import sentencepiece_tokenizer

    _, model, dict_path, _ = sp_data
    tokenizer = sentencepiece_tokenizer(transformers, model, read_dict_symbols(dict_path), 64)
    expected = reference_ids(model, dict_path)
    texts = sentences(1000, 1) + odd_strings(1000, 2) + ["", " ", "  Leading spaces", "🙂🙂👍x", "日本語のテキスト"]
    unk = 0
    for text in texts:
        ids = expected(text)
        assert tokenizer(text)["input_ids"] == ids, (text, ids)
        unk += ids.count(3)
    assert unk > 100  # the odd strings did reach <unk>: the comparison covered it
    assert tokenizer("a <mask> b")["input_ids"].count(tokenizer.mask_token_id) == 1  # fill-mask's token


def test_a_dictionary_lacking_a_piece_is_refused_in_one_line(sp_data, tmp_path):
    from fairseq_maskplug.interop.gpt2_vocab import read_dict_symbols
    from fairseq_maskplug.interop.tokenizer import read_sentencepiece, sentencepiece_vocabulary

    _, model, dict_path, _ = sp_data
    symbols = read_dict_symbols(dict_path)
    with pytest.raises(ValueError, match=r"lacks 1 piece\(s\) of the sentencepiece model"):
        sentencepiece_vocabulary(read_sentencepiece(model), symbols[:-1])
    with pytest.raises(ValueError, match=r"dict.txt:3: 'zz-not-a-piece' is not a piece"):
        sentencepiece_vocabulary(read_sentencepiece(model), symbols[:2] + ["zz-not-a-piece"] + symbols[2:])


def test_data_written_lower_cased_gives_a_tokenizer_that_lower_cases_raw_text(sp_data, tmp_path):
    """The record beside spm.model (``prepare-text --lowercase``, the demo) puts a Lowercase normalizer ahead
    of sentencepiece's: "This Movie" and "this movie" get one set of ids, which is what fairseq's data holds for
    the lower-cased text; without the record the case is kept (capitals become other pieces or <unk>)."""
    import shutil

    from fairseq_maskplug.common.text_case import is_lowercased, write_case_record
    from fairseq_maskplug.interop.gpt2_vocab import read_dict_symbols
    from fairseq_maskplug.interop.tokenizer import sentencepiece_tokenizer

    _, model, dict_path, _ = sp_data
    lower = shutil.copyfile(model, tmp_path / "spm.model")
    assert not is_lowercased(lower)
    cased = sentencepiece_tokenizer(transformers, lower, read_dict_symbols(dict_path), 64)
    assert cased("This Movie")["input_ids"] != cased("this movie")["input_ids"]
    write_case_record(lower, True)
    assert is_lowercased(lower) and (tmp_path / "spm.text.json").is_file()
    tokenizer = sentencepiece_tokenizer(transformers, lower, read_dict_symbols(dict_path), 64)
    expected = reference_ids(lower, dict_path)
    for text in ["This Movie", "THE MOVIE WAS GREAT", "Ünïcödé Wörds in Paris", *sentences(200, 3)]:
        assert tokenizer(text)["input_ids"] == expected(text) == expected(text.lower()), text
    assert tokenizer("This Movie")["input_ids"] == tokenizer("this movie")["input_ids"] == cased("this movie")["input_ids"]
    (tmp_path / "spm.text.json").write_text('{"lowercase": "yes"}')
    with pytest.raises(ValueError, match=r"spm.text.json: not a record of the text's case"):
        is_lowercased(lower)


# ---------------------------------------------------------------------------------------------
# trained models out (full tier)

def convert(*args):
    return run([BIN / "python", "-m", "preprocess.convert", *args])


@pytest.fixture(scope="module")
def trained(sp_data):
    """``{"roberta": checkpoint, "bart": checkpoint}``: real updates on the sentencepiece data; BART's 200
    (about 10 s) on whole sentences, enough that it ends its generations with ``</s>`` by itself (a search
    stopped by the length limit scores its last step differently in the two libraries)."""
    root, _, _, data = sp_data
    common = [BIN / "fairseq-train", data, "--user-dir", REPO / "fairseq_maskplug", *CPU_RUN, "--no-epoch-checkpoints"]
    check(run([*common, "--task", "guided_mlm", "--criterion", "masked_lm", *TINY_ROBERTA, "--max-update", "6",
               "--tokens-per-sample", "32", "--save-dir", root / "roberta"]))
    check(run([*common, "--task", "guided_denoising", "--criterion", "cross_entropy", *TINY_BART, "--max-update", "200",
               "--lr", "3e-3", "--batch-size", "16", "--sample-break-mode", "eos", "--tokens-per-sample", "64",
               "--save-dir", root / "bart"]))
    return {"roberta": root / "roberta" / "checkpoint_last.pt", "bart": root / "bart" / "checkpoint_last.pt"}


def fairseq_model(checkpoint: Path, **overrides):
    from fairseq import checkpoint_utils

    from fairseq_maskplug.integration.compat import allow_fairseq_checkpoint_globals
    allow_fairseq_checkpoint_globals()
    models, _, _ = checkpoint_utils.load_model_ensemble_and_task([str(checkpoint)], arg_overrides=overrides)
    return models[0].eval()


@pytest.mark.e2e
@pytest.mark.full
def test_roberta_on_sentencepiece_data_exports_with_a_tokenizer_that_gives_its_logits_on_raw_text(
        sp_data, trained, tmp_path):
    _, model, dict_path, _ = sp_data
    out = tmp_path / "hf"
    result = check(convert("--from-fairseq", trained["roberta"], "--to", "hf", out))
    assert "RobertaForMaskedLM" in result.stdout
    assert {"tokenizer.json", "model.safetensors", "spm.model", "dict.txt", "config.json"} <= {
        p.name for p in out.iterdir()}
    assert not list(out.glob("*.bin"))
    # every file as readable as a new file under the umask (safetensors wrote model.safetensors 0600)
    umask = os.umask(0)
    os.umask(umask)
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in out.iterdir()} == {
        p.name: oct(0o666 & ~umask) for p in out.iterdir()}
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    hf = transformers.AutoModelForMaskedLM.from_pretrained(out, use_safetensors=True).eval()
    fs = fairseq_model(trained["roberta"])
    expected = reference_ids(model, dict_path)
    for text in ["Ünïcödé wörds, émojis 🙂 and 日本語", "  leading spaces and\ttabs", "ﬁne ① ｆｕｌｌ-width"]:
        ids = tokenizer(text, return_tensors="pt")["input_ids"]
        assert ids[0].tolist() == expected(text)
        with torch.no_grad():
            assert (hf(input_ids=ids).logits - fs(ids)[0]).abs().max().item() <= 1e-5


def best_generations(fs, hf, tokens, beam: int, steps: int, dictionary):
    """The best hypothesis of fairseq's SequenceGenerator and of HF ``generate`` with the same beam, length
    normalisation (length penalty 1), no n-gram or padding tokens, started from ``</s>``."""
    import copy

    from fairseq.sequence_generator import SequenceGenerator

    fs = copy.deepcopy(fs)  # a generator leaves its beam size in the model's attention layers
    generator = SequenceGenerator([fs], dictionary, beam_size=beam, max_len_a=0, max_len_b=steps, min_len=1,
                                  normalize_scores=True, len_penalty=1.0)
    sample = {"net_input": {"src_tokens": tokens, "src_lengths": torch.tensor([tokens.shape[1]])}}
    with torch.no_grad():
        fs_best = generator.generate([fs], sample)[0][0]["tokens"].tolist()
        hf_out = hf.generate(input_ids=tokens, num_beams=beam, do_sample=False, max_new_tokens=steps + 1,
                             min_new_tokens=1, length_penalty=1.0, no_repeat_ngram_size=0,
                             forced_bos_token_id=None, suppress_tokens=[dictionary.pad()],
                             decoder_start_token_id=dictionary.eos())[0].tolist()
    hf_best = [t for t in hf_out[1:] if t != dictionary.pad()]  # the decoder's start </s> and beam padding off
    return fs_best, hf_best


@pytest.mark.e2e
@pytest.mark.full
def test_a_file_size_limit_during_export_and_import_is_one_line_and_leaves_nothing(trained, tmp_path):
    """safetensors reports a refused write in its own words (``SafetensorError ... Os { code: 27 }``) and torch's
    zip writer in others: both directions end in one line naming the output, and leave nothing behind."""
    import resource
    import subprocess
    import sys

    check(convert("--from-fairseq", trained["roberta"], "--to", "hf", tmp_path / "hf"))
    # 64 KiB stops the weights (safetensors, torch); 256 KiB lets them through and stops the tokenizer's JSON,
    # which Hugging Face tokenizers reports as a plain Exception('File too large (os error 27)') (issue 87)
    for source, out, kib in ((["--from-fairseq", trained["roberta"]], "hf-limited", 64),
                             (["--from-hf", tmp_path / "hf"], "fairseq-limited", 64),
                             (["--from-fairseq", trained["roberta"]], "hf-limited-256", 256)):
        to = "hf" if "--from-fairseq" in source else "fairseq"
        result = subprocess.run([sys.executable, "-m", "preprocess.convert", *map(str, source), "--to", to,
                                 str(tmp_path / out)], capture_output=True, text=True, cwd=REPO,
                                preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (kib * 1024,) * 2))
        error = result.stderr.strip().splitlines()
        assert result.returncode == 2 and len(error) == 1, result.stderr[-3000:]
        assert f"writing {tmp_path / out} failed" in error[0] and "file-size limit" in error[0], error
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(out)]


@pytest.mark.e2e
@pytest.mark.full
def test_a_damaged_or_mismatched_hf_directory_is_named_in_one_line(trained, tmp_path):
    import json
    import shutil

    check(convert("--from-fairseq", trained["roberta"], "--to", "hf", tmp_path / "hf"))
    cut = shutil.copytree(tmp_path / "hf", tmp_path / "cut")
    weights = cut / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    other = shutil.copytree(tmp_path / "hf", tmp_path / "other")
    config = json.loads((other / "config.json").read_text())
    (other / "config.json").write_text(json.dumps(dict(config, vocab_size=config["vocab_size"] + 8)))
    swapped = shutil.copytree(tmp_path / "hf", tmp_path / "swapped")  # another data set's dictionary copied in
    rows = (swapped / "dict.txt").read_text(encoding="utf-8").splitlines()
    rows[0], rows[1] = rows[1], rows[0]
    (swapped / "dict.txt").write_text("\n".join(rows) + "\n", encoding="utf-8")
    assert json.loads((tmp_path / "hf" / "maskplug_export.json").read_text())["files"].keys() >= {"dict.txt",
                                                                                                  "spm.model"}
    for source, said in ((swapped, f"{swapped / 'dict.txt'} is not the file this export was made with"),
                         (cut, f"{weights} is damaged ("),
                         (other, f"{other / 'config.json'} says vocab_size {config['vocab_size'] + 8}, ")):
        result = convert("--from-hf", source, "--to", "fairseq", tmp_path / f"{source.name}-release")
        error = result.stderr.strip().splitlines()
        assert result.returncode == 2 and len(error) == 1 and said in error[0], result.stderr[-2000:]
        assert "Traceback" not in result.stderr and not (tmp_path / f"{source.name}-release").exists()


@pytest.mark.e2e
@pytest.mark.full
def test_a_t5_format_bart_is_refused_naming_its_sentinels(sp_data, tmp_path):
    _, _, _, data = sp_data
    check(run([BIN / "fairseq-train", data, "--user-dir", REPO / "fairseq_maskplug", *CPU_RUN, "--task",
               "guided_denoising", "--criterion", "cross_entropy", *TINY_BART, "--max-update", "1",
               "--target-format", "t5", "--leave-unmasked-prob", "0", "--random-token-prob", "0",
               "--tokens-per-sample", "32", "--save-dir", tmp_path / "t5"]))
    result = convert("--from-fairseq", tmp_path / "t5" / "checkpoint_last.pt", "--to", "hf", tmp_path / "hf")
    assert result.returncode == 2 and not (tmp_path / "hf").exists()
    assert "--target-format t5" in result.stderr and "100 T5 sentinels <extra_id_0> ... <extra_id_99>" in result.stderr


@pytest.mark.e2e
@pytest.mark.full
def test_bart_exports_and_imports_with_equal_logits_and_the_same_generations(sp_data, trained, tmp_path):
    _, model, dict_path, _ = sp_data
    out, back = tmp_path / "hf", tmp_path / "fairseq"
    result = check(convert("--from-fairseq", trained["bart"], "--to", "hf", out))
    assert "BartForConditionalGeneration" in result.stdout
    hf = transformers.AutoModelForSeq2SeqLM.from_pretrained(out, use_safetensors=True).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    fs = fairseq_model(trained["bart"])
    expected = reference_ids(model, dict_path)
    from fairseq.data import Dictionary
    dictionary = Dictionary.load(str(dict_path))
    dictionary.add_symbol("<mask>")
    for text in ["the movie was great 🙂", "  Paris 1999 naïve café", "日本語 テキスト (yes)"]:
        tokens = tokenizer(text, return_tensors="pt")["input_ids"]
        assert tokens[0].tolist() == expected(text)
        previous = torch.roll(tokens, 1, dims=1)
        with torch.no_grad():
            fs_logits = fs(tokens, torch.tensor([tokens.shape[1]]), previous)[0]
            hf_out = hf(input_ids=tokens, decoder_input_ids=previous)
            fs_encoded = fs.encoder(tokens, src_lengths=torch.tensor([tokens.shape[1]]))["encoder_out"][0]
        assert (fs_logits - hf_out.logits).abs().max().item() <= 1e-5
        assert (fs_encoded.transpose(0, 1) - hf_out.encoder_last_hidden_state).abs().max().item() <= 1e-5
        for beam in (1, 3):
            fs_best, hf_best = best_generations(fs, hf, tokens, beam, 40, dictionary)
            assert fs_best == hf_best, (text, beam, fs_best, hf_best)
            assert fs_best[-1] == dictionary.eos() and len(fs_best) < 40  # ended by the model, not the limit

    result = check(convert("--from-hf", out, "--to", "fairseq", back))
    assert "fairseq BART" in result.stdout
    assert {"model.pt", "dict.txt", "spm.model"} <= {p.name for p in back.iterdir()}
    again = fairseq_model(back / "model.pt", data=str(back))  # a release's data directory is itself
    tokens = tokenizer("the movie was great", return_tensors="pt")["input_ids"]
    previous = torch.roll(tokens, 1, dims=1)
    with torch.no_grad():
        difference = again(tokens, torch.tensor([tokens.shape[1]]), previous)[0] - fs(
            tokens, torch.tensor([tokens.shape[1]]), previous)[0]
    assert difference.abs().max().item() <= 1e-5

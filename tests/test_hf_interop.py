"""Hugging Face <-> fairseq RoBERTa conversion (preprocess/convert.py) on tiny random models made here.

A tiny byte-level BPE tokenizer is trained on generated sentences (``tokenizers``), a random
``RobertaForMaskedLM`` / ``RobertaForSequenceClassification`` is saved as HF saves it, converted
to a fairseq release directory and back. fairseq's side is read with fairseq's own RoBERTa hub
interface and GPT-2 BPE encoder, so the tokenisation compared is fairseq's, not ours. Quick tier:
the masked LM both ways and the refused vocabulary; full tier: the classifier both ways and the
tokenisation of 300 sentences.
"""

import json
import random
from pathlib import Path

import pytest
import torch

from fairseq_helpers import BIN, check, run, transformers_or_skip

from fairseq_maskplug.common.atomic import OWNER_FILE

transformers = transformers_or_skip()

WORDS = ("the a movie film plot actor was wasn't isn't great bad superb boring Paris London 1999 3.14 don't "
         "can't I'm we've they'll naïve café résumé 🙂 — (yes) [no] \"quoted\" $5 50% e-mail").split()


def sentences(n: int, seed: int):
    """Sentences with contractions, digits, accents, emoji, punctuation, runs of spaces and tabs."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 14))) + rng.choice([".", "!", "?", "", " ..."])
        if rng.random() < 0.1:
            text = "  " + text
        if rng.random() < 0.1:
            text = text.replace(" ", "\t", 1)
        out.append(text)
    return out


def tiny_hf(directory: Path, classifier: bool, bart: bool = False) -> Path:
    """A tiny random HF RoBERTa (or BART, laid out as ``facebook/bart-base``) with a byte-level BPE
    tokenizer in fairseq's row layout (<mask> last)."""
    from tokenizers import ByteLevelBPETokenizer

    directory.mkdir()
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(sentences(500, 0), vocab_size=400, min_frequency=2, show_progress=False,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>"])
    bpe.save_model(str(directory))
    vocab = json.loads((directory / "vocab.json").read_text(encoding="utf-8"))
    vocab["<mask>"] = len(vocab)
    (directory / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    (transformers.BartTokenizer if bart else transformers.RobertaTokenizer).from_pretrained(directory).save_pretrained(
        directory)
    torch.manual_seed(0)
    if bart:
        config = transformers.BartConfig(vocab_size=len(vocab), d_model=32, encoder_layers=2, decoder_layers=1,
                                         encoder_attention_heads=2, decoder_attention_heads=4, encoder_ffn_dim=64,
                                         decoder_ffn_dim=48, max_position_embeddings=64, forced_bos_token_id=0)
        model = transformers.BartForConditionalGeneration(config)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name != "final_logits_bias":
                    p.normal_(0, 0.5 if p.dim() > 1 else 0.1)
        model.save_pretrained(directory)
        return directory
    config = transformers.RobertaConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2,
                                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=66,
                                        type_vocab_size=1, layer_norm_eps=1e-5, num_labels=3)
    model = (transformers.RobertaForSequenceClassification if classifier else transformers.RobertaForMaskedLM)(config)
    with torch.no_grad():  # large random weights: logits far from uniform, so differences would show
        for p in model.parameters():
            p.normal_(0, 0.5 if p.dim() > 1 else 0.1)
        model.roberta.embeddings.token_type_embeddings.weight.zero_()
    model.save_pretrained(directory)
    return directory


def convert(*args):
    return run([BIN / "python", "-m", "preprocess.convert", *args])


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """``converted(kind)``: (hf, fairseq release, hf again) for the masked LM ("mlm"), the classifier
    ("cls") or BART ("bart"), each converted once, when a test first asks for it."""
    root = tmp_path_factory.mktemp("hf")
    out = {}

    def get(kind):
        if kind not in out:
            hf = tiny_hf(root / f"{kind}_hf", classifier=kind == "cls", bart=kind == "bart")
            check(convert("--from-hf", hf, "--to", "fairseq", root / f"{kind}_fs"))
            check(convert("--from-fairseq", root / f"{kind}_fs", "--to", "hf", root / f"{kind}_back",
                          *(["--head", "sentence_classification_head"] if kind == "cls" else [])))
            out[kind] = (hf, root / f"{kind}_fs", root / f"{kind}_back")
        return out[kind]
    return get


def fairseq_hub(release: Path):
    from fairseq.models.roberta import RobertaModel

    from fairseq_maskplug.integration.compat import allow_fairseq_checkpoint_globals
    allow_fairseq_checkpoint_globals()
    hub = RobertaModel.from_pretrained(str(release), checkpoint_file="model.pt", bpe="gpt2",
                                       gpt2_encoder_json=str(release / "encoder.json"),
                                       gpt2_vocab_bpe=str(release / "vocab.bpe"))
    return hub.eval()


def padded(rows, pad: int):
    batch = torch.full((len(rows), max(len(r) for r in rows)), pad, dtype=torch.long)
    for i, r in enumerate(rows):
        batch[i, : len(r)] = torch.as_tensor(r)
    return batch


def test_release_directory_has_fairseq_layout(converted):
    _, release, _ = converted("mlm")
    assert sorted(p.name for p in release.iterdir()) == [OWNER_FILE, "dict.txt", "encoder.json", "model.pt",
                                                         "vocab.bpe"]  # the owner file: atomic.py
    state = torch.load(release / "model.pt", map_location="cpu", weights_only=False)
    assert state["args"].arch == "roberta_base" and state["args"].encoder_layers == 2  # saved as releases are


@pytest.mark.full
def test_tokenisation_identical_on_300_sentences(converted):
    hf, release, back = converted("mlm")
    hub = fairseq_hub(release)
    original = transformers.AutoTokenizer.from_pretrained(hf)
    returned = transformers.AutoTokenizer.from_pretrained(back)
    texts = sentences(300, 1)
    fs_ids = [hub.encode(t).tolist() for t in texts]
    assert fs_ids == [original(t)["input_ids"] for t in texts]
    assert fs_ids == [returned(t)["input_ids"] for t in texts]
    assert sum(len(r) for r in fs_ids) > 3000 and max(max(r) for r in fs_ids) > 300  # merges are exercised
    d = hub.task.source_dictionary
    for tok in (original, returned):
        assert (tok.bos_token_id, tok.pad_token_id, tok.eos_token_id, tok.unk_token_id, tok.mask_token_id) == \
            (d.bos(), d.pad(), d.eos(), d.unk(), d.index("<mask>"))
    assert returned.get_vocab() == original.get_vocab()
    assert (release / "vocab.bpe").read_text() == (hf / "merges.txt").read_text()


def test_masked_lm_logits_equal_both_ways(converted):
    hf, release, back = converted("mlm")
    hub = fairseq_hub(release)
    tokenizer = transformers.AutoTokenizer.from_pretrained(hf)
    batch = padded([hub.encode(t).tolist() for t in sentences(64, 2)], hub.task.source_dictionary.pad())
    keep = batch.ne(1)
    with torch.no_grad():
        fs_logits = hub.model(batch)[0]
        hf_logits = transformers.AutoModelForMaskedLM.from_pretrained(hf).eval()(
            input_ids=batch, attention_mask=keep.long()).logits
        # the export is safetensors (no pickle: it loads without running code), and loads as such
        back_logits = transformers.AutoModelForMaskedLM.from_pretrained(back, use_safetensors=True).eval()(
            input_ids=batch, attention_mask=keep.long()).logits
    assert (back / "model.safetensors").is_file() and not list(back.glob("*.bin"))
    assert fs_logits.std() > 0.1  # random weights give varied logits: a mis-mapped parameter would show
    assert (fs_logits - hf_logits)[keep].abs().max() <= 1e-5
    assert (back_logits - hf_logits)[keep].abs().max() <= 1e-5
    assert tokenizer.pad_token_id == 1


@pytest.mark.full
def test_classifier_logits_equal_both_ways(converted):
    hf, release, back = converted("cls")
    hub = fairseq_hub(release)
    texts = sentences(32, 3)
    with torch.no_grad():
        fs_logits = torch.cat([hub.predict("sentence_classification_head", hub.encode(t), return_logits=True)
                               for t in texts])
        tokenizer = transformers.AutoTokenizer.from_pretrained(back)
        hf_model = transformers.AutoModelForSequenceClassification.from_pretrained(hf).eval()
        back_model = transformers.AutoModelForSequenceClassification.from_pretrained(back).eval()
        hf_logits = torch.cat([hf_model(**tokenizer(t, return_tensors="pt")).logits for t in texts])
        back_logits = torch.cat([back_model(**tokenizer(t, return_tensors="pt")).logits for t in texts])
    assert fs_logits.shape == (32, 3) and fs_logits.std() > 0.1
    assert (fs_logits - hf_logits).abs().max() <= 1e-5
    assert (back_logits - hf_logits).abs().max() <= 1e-5


@pytest.mark.full
def test_bart_with_gpt2_bpe_logits_equal_both_ways(converted):
    """A BART as ``facebook/bart-base`` is laid out (byte-level BPE vocab.json + merges.txt) to a fairseq release
    (read with fairseq's own BART hub interface and GPT-2 encoder) and back: same ids, same logits."""
    from fairseq.models.bart import BARTModel

    from fairseq_maskplug.integration.compat import allow_fairseq_checkpoint_globals
    hf, release, back = converted("bart")
    allow_fairseq_checkpoint_globals()
    hub = BARTModel.from_pretrained(str(release), checkpoint_file="model.pt", bpe="gpt2",
                                    gpt2_encoder_json=str(release / "encoder.json"),
                                    gpt2_vocab_bpe=str(release / "vocab.bpe")).eval()
    assert {"tokenizer.json", "vocab.json", "merges.txt", "model.safetensors"} <= {p.name for p in back.iterdir()}
    original = transformers.AutoModelForSeq2SeqLM.from_pretrained(hf).eval()
    returned = transformers.AutoModelForSeq2SeqLM.from_pretrained(back, use_safetensors=True).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(back)
    for text in sentences(16, 4):
        tokens = hub.encode(text).unsqueeze(0)
        assert tokens[0].tolist() == tokenizer(text)["input_ids"]
        previous = torch.roll(tokens, 1, dims=1)
        with torch.no_grad():
            fs_logits = hub.model(tokens, torch.tensor([tokens.shape[1]]), previous)[0]
            hf_logits = original(input_ids=tokens, decoder_input_ids=previous).logits
            back_logits = returned(input_ids=tokens, decoder_input_ids=previous).logits
        assert fs_logits.std() > 0.1
        assert (fs_logits - hf_logits).abs().max() <= 1e-5 and (back_logits - hf_logits).abs().max() <= 1e-5


def test_bad_vocabulary_stops_with_one_line(converted, tmp_path):
    hf, _, _ = converted("mlm")
    broken = tmp_path / "broken"
    broken.mkdir()
    for f in hf.iterdir():
        (broken / f.name).write_bytes(f.read_bytes())
    vocab = json.loads((broken / "vocab.json").read_text(encoding="utf-8"))
    token = next(t for t, i in vocab.items() if i == 10)
    vocab["<mask>"], vocab[token] = vocab[token], vocab["<mask>"]
    (broken / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    result = convert("--from-hf", broken, "--to", "fairseq", tmp_path / "out")
    assert result.returncode == 2 and "'<mask>'" in result.stderr and "last" in result.stderr
    assert not (tmp_path / "out").exists()


def hf_built_roberta(directory: Path, mask_last: bool = True) -> Path:
    """A RoBERTa made the usual Hugging Face way (issue 92, item 4): a byte-level BPE trained by ``tokenizers``,
    ``RobertaConfig()``'s defaults (``layer_norm_eps`` 1e-12, two token types), a randomly initialised
    ``RobertaForMaskedLM`` and ``save_pretrained`` (transformers 5 writes ``tokenizer.json`` and no ``vocab.json``).
    ``mask_last``: ``<mask>`` added after training (fairseq's order); else among the trainer's specials (id 4)."""
    from tokenizers import ByteLevelBPETokenizer

    specials = ["<s>", "<pad>", "</s>", "<unk>"]
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(sentences(500, 0), vocab_size=400, min_frequency=2, show_progress=False,
                            special_tokens=specials if mask_last else specials + ["<mask>"])
    if mask_last:
        bpe.add_special_tokens(["<mask>"])
    tokenizer = transformers.RobertaTokenizerFast(tokenizer_object=bpe._tokenizer)
    config = transformers.RobertaConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2,
                                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=66)
    assert config.layer_norm_eps == 1e-12 and config.type_vocab_size == 2  # the defaults this is about
    torch.manual_seed(0)
    model = transformers.RobertaForMaskedLM(config)
    assert model.roberta.embeddings.token_type_embeddings.weight.abs().max() > 0
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.mark.full  # two conversions in new processes: about 30 s
def test_a_roberta_made_the_hf_way_converts_both_ways_with_equal_logits(tmp_path):
    """``RobertaConfig()``'s layer_norm_eps 1e-12 is carried (``--layernorm-eps``), token-type row 0 is folded into
    the positions, the vocabulary is read from ``tokenizer.json``: fairseq's logits (its own GPT-2 BPE ids) equal
    HF's, and the model exported back gives them too."""
    hf = hf_built_roberta(tmp_path / "hf")
    check(convert("--from-hf", hf, "--to", "fairseq", tmp_path / "fs"))
    check(convert("--from-fairseq", tmp_path / "fs", "--to", "hf", tmp_path / "back"))
    hub = fairseq_hub(tmp_path / "fs")
    assert hub.model.args.layernorm_eps == 1e-12
    assert {m.eps for m in hub.model.modules() if isinstance(m, torch.nn.LayerNorm)} == {1e-12}
    tokenizer = transformers.AutoTokenizer.from_pretrained(hf)
    rows = [hub.encode(t).tolist() for t in sentences(64, 2)]
    assert rows == [tokenizer(t)["input_ids"] for t in sentences(64, 2)]
    batch = padded(rows, 1)
    keep = batch.ne(1)
    with torch.no_grad():
        fs_logits = hub.model(batch)[0]
        hf_logits = transformers.AutoModelForMaskedLM.from_pretrained(hf).eval()(
            input_ids=batch, attention_mask=keep.long()).logits
        back = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "back").eval()
        back_logits = back(input_ids=batch, attention_mask=keep.long()).logits
    assert back.config.layer_norm_eps == 1e-12
    assert (fs_logits - hf_logits)[keep].abs().max() <= 1e-5 and (back_logits - hf_logits)[keep].abs().max() <= 1e-5
    # the tolerance can see what was converted: fairseq's 1e-5 in every LayerNorm moves the logits by more
    for module in hub.model.modules():
        if isinstance(module, torch.nn.LayerNorm):
            module.eps = 1e-5
    with torch.no_grad():
        assert (hub.model(batch)[0] - hf_logits)[keep].abs().max() > 1e-4


def test_a_tokenizer_with_mask_among_the_trainers_specials_is_refused_with_the_recipe(tmp_path):
    """Issue 92, item 5: the usual ``tokenizers`` recipe puts ``<mask>`` at id 4; the conversion and ``with_track``
    refuse it alike, in one line saying how to train one with ``<mask>`` last."""
    from fairseq_maskplug.hf_tracks import check_tokenizer
    from fairseq_maskplug.interop.gpt2_vocab import MASK_LAST_RECIPE

    hf = hf_built_roberta(tmp_path / "hf", mask_last=False)
    result = convert("--from-hf", hf, "--to", "fairseq", tmp_path / "fs")
    assert result.returncode == 2 and "'<mask>' at id 4 of" in result.stderr and MASK_LAST_RECIPE in result.stderr
    assert not (tmp_path / "fs").exists()
    with pytest.raises(ValueError, match="'<mask>' at id 4 of .*add_special_tokens"):
        check_tokenizer(transformers.AutoTokenizer.from_pretrained(hf))


@pytest.mark.full  # importing transformers in a new process: about 10 s
def test_a_users_own_hugging_face_script_imports_in_the_projects_environment():
    """Without the plugin's workaround (hide_broken_torchaudio): recipes/setup_env.sh removes the torchaudio
    that fairseq-fixed pulls for another torch, so transformers' model classes import in a plain process."""
    script = ("import sys; from transformers import RobertaForMaskedLM, BartForConditionalGeneration; "
              "assert 'fairseq_maskplug' not in sys.modules; print('imported')")
    result = check(run([BIN / "python", "-c", script], timeout=300))
    assert result.stdout.strip().splitlines()[-1] == "imported"

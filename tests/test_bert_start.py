"""BERT-type encoders -> fairseq RoBERTa (fairseq_maskplug.interop.bert; issue 100's optional start, e.g.
all-MiniLM-L6-v2), on tiny random models made here: a WordPiece vocabulary trained by ``tokenizers``, a random
``BertModel`` / ``BertForMaskedLM`` saved as Hugging Face saves it, converted, then read by fairseq on the data
``prepare-text --like`` writes for it. Quick tier."""

import json
from pathlib import Path

import pytest
import torch

from fairseq_helpers import BIN, CPU_RUN, check, one_line_error, run, transformers_or_skip

from fairseq_maskplug.interop.bert import hf_to_fairseq_state, vocabulary_order

transformers = transformers_or_skip()

SENTENCES = [f"the {a} film was {b} , and its {c} was {d} ."
             for a in ("long", "short", "french", "quiet") for b in ("great", "dull", "moving", "bad")
             for c, d in (("plot", "thin"), ("cast", "superb"), ("ending", "unearned"), ("music", "loud"))]


def tiny_bert(directory: Path, masked_lm: bool) -> Path:
    """A random 2-layer BERT with two token types and ``layer_norm_eps`` 1e-12 (BERT's defaults), a WordPiece
    vocabulary trained on :data:`SENTENCES`, saved with ``vocab.txt`` and ``tokenizer_config.json``."""
    from tokenizers import BertWordPieceTokenizer

    directory.mkdir()
    wordpiece = BertWordPieceTokenizer(lowercase=True)
    wordpiece.train_from_iterator(SENTENCES * 4, vocab_size=120, min_frequency=1, show_progress=False)
    wordpiece.save_model(str(directory))
    (directory / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    tokens = (directory / "vocab.txt").read_text().splitlines()
    config = transformers.BertConfig(vocab_size=len(tokens), hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
                                     pad_token_id=tokens.index("[PAD]"))
    assert config.layer_norm_eps == 1e-12 and config.type_vocab_size == 2
    torch.manual_seed(0)
    model = (transformers.BertForMaskedLM if masked_lm else transformers.BertModel)(config)
    with torch.no_grad():  # large random weights: outputs far from uniform, so differences would show
        for p in model.parameters():
            p.normal_(0, 0.5 if p.dim() > 1 else 0.1)
    model.save_pretrained(directory)
    return directory


def test_the_vocabulary_puts_berts_specials_where_fairseq_keeps_its_own():
    tokens = ["[PAD]", "[unused0]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "##s", "film"]
    symbols, rows = vocabulary_order(tokens)
    assert symbols == ["[unused0]", "the", "##s", "film"]
    # fairseq ids: <s> <pad> </s> <unk>, dict.txt's symbols, <mask>
    assert [tokens[r] for r in rows] == ["[CLS]", "[PAD]", "[SEP]", "[UNK]", *symbols, "[MASK]"]
    with pytest.raises(ValueError, match="no \\[MASK\\]"):
        vocabulary_order([t for t in tokens if t != "[MASK]"])
    with pytest.raises(ValueError, match="line 10: 'the' is also line 7"):
        vocabulary_order(tokens + ["the"])
    with pytest.raises(ValueError, match="cannot be a fairseq dictionary symbol"):
        vocabulary_order(tokens + ["<s>"])


def test_positions_gain_two_leading_rows_and_token_type_zero():
    hidden = 4
    hf = {"embeddings.word_embeddings.weight": torch.arange(6 * hidden, dtype=torch.float).view(6, hidden),
          "embeddings.position_embeddings.weight": torch.ones(3, hidden),
          "embeddings.token_type_embeddings.weight": torch.stack([torch.full((hidden,), 5.0), torch.zeros(hidden)]),
          "embeddings.LayerNorm.weight": torch.ones(hidden), "embeddings.LayerNorm.bias": torch.zeros(hidden)}
    for name in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
                 "attention.output.LayerNorm", "intermediate.dense", "output.dense", "output.LayerNorm"):
        hf[f"encoder.layer.0.{name}.weight"] = torch.zeros(hidden)
        hf[f"encoder.layer.0.{name}.bias"] = torch.zeros(hidden)
    rows = [3, 0, 4, 1, 2, 5]
    state = hf_to_fairseq_state({f"bert.{k}": v for k, v in hf.items()}, rows)
    fs = "encoder.sentence_encoder."
    assert torch.equal(state[fs + "embed_tokens.weight"], hf["embeddings.word_embeddings.weight"][rows])
    positions = state[fs + "embed_positions.weight"]
    assert positions.shape == (5, hidden) and not positions[:2].any() and torch.equal(positions[2:], torch.full((3, hidden), 6.0))
    assert not any(k.startswith("encoder.lm_head") for k in state)  # a BertModel: the head stays fairseq's own
    with pytest.raises(ValueError, match="vocabulary has 5 rows"):
        hf_to_fairseq_state(hf, rows[:5])


@pytest.mark.e2e
@pytest.mark.parametrize("masked_lm", [False, True], ids=["BertModel", "BertForMaskedLM"])
def test_a_bert_converts_and_fairseq_reads_prepared_text_as_hf_does(tmp_path, masked_lm):
    """The release's encoder gives HF's hidden states (and a masked LM its logits) on the ids ``prepare-text
    --like`` wrote for text HF's tokenizer pieces the same way, padded in one batch; then it trains as a start."""
    from fairseq.models.roberta import RobertaModel

    hf = tiny_bert(tmp_path / "hf", masked_lm)
    said = check(run([BIN / "python", "-m", "preprocess.convert", "--from-hf", hf, "--to", "fairseq",
                      tmp_path / "fs"]))
    assert ("its masked-LM head" if masked_lm else "a fresh masked-LM head") in said.stdout
    (tmp_path / "text.train.txt").write_text("".join(s.upper() + "\n" for s in SENTENCES[:40]))
    (tmp_path / "text.valid.txt").write_text("".join(s + "\n" for s in SENTENCES[40:]))
    check(run([BIN / "fairseq-maskplug-prepare-text", "--like", tmp_path / "fs", "--out", tmp_path / "data",
               "--unlabelled", "reviews", tmp_path / "text.train.txt", tmp_path / "text.valid.txt"]))
    tokenizer = transformers.BertTokenizer.from_pretrained(hf)
    pieces = (tmp_path / "data" / "text" / "reviews.train.tok").read_text().splitlines()
    assert pieces == [" ".join(tokenizer.tokenize(s)) for s in SENTENCES[:40]]  # lower-cased as BERT's tokenizer

    from fairseq_maskplug.integration.compat import allow_fairseq_checkpoint_globals
    allow_fairseq_checkpoint_globals()
    hub = RobertaModel.from_pretrained(str(tmp_path / "fs"), checkpoint_file="model.pt", bpe=None).eval()
    tokens = (hf / "vocab.txt").read_text().splitlines()
    to_hf = torch.as_tensor(vocabulary_order(tokens)[1])
    fs_rows = [hub.task.source_dictionary.encode_line(f"<s> {line} </s>", append_eos=False,
                                                      add_if_not_exist=False).long() for line in pieces]
    assert all(r.ne(hub.task.source_dictionary.unk()).all() for r in fs_rows)
    width = max(len(r) for r in fs_rows)
    batch = torch.stack([torch.cat([r, r.new_ones(width - len(r))]) for r in fs_rows])  # fairseq's pad is 1
    keep = batch.ne(1)
    hf_ids = to_hf[batch]
    assert hf_ids[keep].tolist() == [i for s in SENTENCES[:40] for i in tokenizer(s)["input_ids"]]
    model = (transformers.BertForMaskedLM if masked_lm else transformers.BertModel).from_pretrained(hf).eval()
    with torch.no_grad():
        fs_hidden = hub.model(batch, features_only=True)[0]
        hf_out = model(input_ids=hf_ids, attention_mask=keep.long(), output_hidden_states=True)
        assert (fs_hidden - hf_out.hidden_states[-1])[keep].abs().max() <= 1e-4
        if masked_lm:
            fs_logits = hub.model(batch)[0]
            assert (fs_logits - hf_out.logits[..., to_hf])[keep].abs().max() <= 1e-4
    # its blocks are its positions long (masked_lm's default 1,024 outran them in evaluate-mlm)
    assert hub.model.args.tokens_per_sample == hub.model.args.max_positions == 64
    # BERT's 1e-12 in every LayerNorm is carried, not fairseq's 1e-5
    assert {m.eps for m in hub.model.modules() if isinstance(m, torch.nn.LayerNorm)} == {1e-12}
    # the fixed-mask scorer reads it by its own options (a release's blocks once outran its positions there)
    scored = check(run([BIN / "fairseq-maskplug-evaluate-mlm", "--data", tmp_path / "data" / "reviews",
                        tmp_path / "fs" / "model.pt"]))
    assert json.loads(scored.stdout.strip().splitlines()[-1])["masked"] > 0
    # continued pre-training starts from it
    trained = check(run([BIN / "fairseq-maskplug-train", tmp_path / "data" / "reviews", "--task", "guided_mlm",
                         "--finetune-from-model", tmp_path / "fs" / "model.pt", "--save-dir", tmp_path / "ck",
                         "--max-update", "2", "--tokens-per-sample", "32", "--no-save",
                         *model_options(tmp_path / "fs"), *CPU_RUN], new_process=True))
    assert "num_updates" in trained.stdout


def model_options(release: Path):
    result = check(run([BIN / "python", "-m", "fairseq_maskplug.interop.release", release]))
    return result.stdout.split()


def test_a_bert_with_a_head_option_is_refused_in_one_line(tmp_path):
    hf = tiny_bert(tmp_path / "hf", masked_lm=False)
    one_line_error(run([BIN / "python", "-m", "preprocess.convert", "--from-hf", hf, "--to", "fairseq", tmp_path / "fs",
                        "--head", "x"]), "--head")
    assert not (tmp_path / "fs").exists()

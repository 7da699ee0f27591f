"""The pure pieces of the release / Hugging Face interop (no transformers needed)."""

from argparse import Namespace

import pytest

from fairseq_maskplug.interop import gpt2_vocab
from fairseq_maskplug.interop.release import model_options
from preprocess import prepare_demo


def hf_vocab(tokens, gap_at=()):
    """An HF RoBERTa vocabulary: specials 0-3, ``tokens`` (skipping the rows in ``gap_at``), <mask> last."""
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    row = 4
    for token in tokens:
        while row in gap_at:
            row += 1
        vocab[token] = row
        row += 1
    vocab["<mask>"] = row
    return vocab


def test_vocabulary_round_trip_keeps_every_row_including_gaps():
    vocab = hf_vocab(["Ġthe", "the", "Ġfilm", "!", "Ġé"], gap_at={6})
    encoder, symbols = gpt2_vocab.hf_to_fairseq(vocab)
    assert symbols == ["4", "5", gpt2_vocab.placeholder(6), "7", "8", "9"]
    assert encoder == {"Ġthe": 4, "the": 5, "Ġfilm": 7, "!": 8, "Ġé": 9}
    back = gpt2_vocab.fairseq_to_hf(encoder, symbols)
    assert back == {**vocab, gpt2_vocab.placeholder(6): 6}


def test_fairseq_labels_map_to_the_rows_of_dict_txt():
    encoder = {"a": 100, "b": 7, "Ġc": 55, "unused": 3}  # GPT-2 labels, in no particular order
    vocab = gpt2_vocab.fairseq_to_hf(encoder, ["55", "100", "madeupword0000", "7"])
    assert vocab == {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "Ġc": 4, "a": 5, "madeupword0000": 6, "b": 7,
                     "<mask>": 8}  # a token whose label is not in dict.txt is left out (fairseq: <unk>)


@pytest.mark.parametrize("change,message", [
    (lambda v: v.update({"<pad>": 0, "<s>": 1}), "'<s>' at 1, fairseq needs it at 0"),
    (lambda v: v.update({"<mask>": 4, "x": v["<mask>"]}), "'<mask>' at id 4 of .*must be the last id; train the tokenizer"),
    (lambda v: v.update({"y": 5}), "share id 5"),
])
def test_vocabulary_without_fairseq_s_layout_is_refused(change, message):
    vocab = hf_vocab(["x", "z"])
    change(vocab)
    with pytest.raises(ValueError, match=message):
        gpt2_vocab.hf_to_fairseq(vocab)


def test_release_model_options_rebuild_roberta_and_bart_shapes():
    roberta = Namespace(arch="roberta_large", encoder_layers=24, encoder_embed_dim=1024, encoder_ffn_embed_dim=4096,
                        encoder_attention_heads=16, max_positions=512, activation_fn="gelu", dropout=0.1,
                        untie_weights_roberta=False, lr=[0.0006])
    assert model_options(roberta) == [
        "--arch", "roberta_large", "--encoder-layers", "24", "--encoder-embed-dim", "1024",
        "--encoder-ffn-embed-dim", "4096", "--encoder-attention-heads", "16", "--max-positions", "512",
        "--activation-fn", "gelu", "--dropout", "0.1"]
    bart = Namespace(arch="bart_base", encoder_layers=6, decoder_layers=6, max_source_positions=1024,
                     share_all_embeddings=True, encoder_normalize_before=False)
    assert model_options(bart) == ["--arch", "bart_base", "--encoder-layers", "6", "--decoder-layers", "6",
                                   "--max-source-positions", "1024", "--share-all-embeddings"]
    with pytest.raises(ValueError, match="only fairseq's roberta_\\* and bart_\\* releases"):
        model_options(Namespace(arch="transformer_lm"))


def test_prepare_demo_refuses_half_a_release_before_any_work(tmp_path, capsys):
    assert prepare_demo.main(["--out", str(tmp_path / "data"), "--gpt2-bpe", str(tmp_path)]) == 2
    assert "--gpt2-bpe and --srcdict go together" in capsys.readouterr().err
    (tmp_path / "dict.txt").write_text("10 1\n")
    assert prepare_demo.main(["--out", str(tmp_path / "data"), "--gpt2-bpe", str(tmp_path),
                              "--srcdict", str(tmp_path / "dict.txt")]) == 2
    assert "encoder.json: no such file" in capsys.readouterr().err
    assert not (tmp_path / "data").exists() and not (tmp_path / "downloads").exists()

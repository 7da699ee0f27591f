"""The tokenizer that goes with an exported model: raw text -> the ids fairseq was trained on.

Two kinds of data are trained here, and each gets a Hugging Face fast tokenizer (``tokenizer.json``):

- **sentencepiece** (the demo's ``spm.model``, ``prepare-text``'s, a user's own unigram model):
  the data was written as the model's pieces (``sp.encode(text, out_type=str)``) and binarized with
  ``dict.txt``, so fairseq's id of a piece is its row in ``dict.txt`` after the four specials
  ``<s> <pad> </s> <unk>``, and ``<mask>`` follows the last row. :func:`sentencepiece_tokenizer`
  builds a ``tokenizers`` Unigram model over exactly those rows, in that order, with the
  sentencepiece model's scores, behind sentencepiece's own normalizer (its precompiled
  character map, e.g. ``nmt_nfkc``) and its whitespace rules; what XLM-R's converter in
  ``transformers`` does for fairseq's XLM-R, whose sentencepiece model has three specials where
  ours has one. A piece the model can produce but ``dict.txt`` lacks would be ``<unk>`` to fairseq
  and cannot be said in a Unigram model: refused.
- **GPT-2 BPE** (fairseq's RoBERTa and BART releases): ``RobertaTokenizerFast`` over the
  ``vocab.json`` and ``merges.txt`` the export writes (:mod:`.gpt2_vocab`).

Data written from lower-cased text (the demo's, ``prepare-text --lowercase``: recorded beside the model,
:mod:`..common.text_case`) is lower-cased first by both :func:`sentencepiece_ids` and the tokenizer
(a ``Lowercase`` normalizer ahead of sentencepiece's), so ``"This Movie"`` and ``"this movie"`` give
the same ids; data without the record is pieced as it is.

Both add ``<s> ... </s>`` around a sentence (``<s> A </s></s> B </s>`` for a pair), as fairseq's
``masked_lm``, ``sentence_prediction`` and BART tasks do. ``<s> <pad> </s> <unk> <mask>`` written
in raw text are read as those tokens (so ``fill-mask`` works), where sentencepiece spells them
as pieces.
"""

from functools import lru_cache
from pathlib import Path
from typing import List, Sequence, Tuple

from ..common.text_case import is_lowercased

SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")  # fairseq's Dictionary rows 0-3
MASK = "<mask>"


def read_sentencepiece(spm_model: Path):
    """The sentencepiece ``ModelProto`` of ``spm_model``; a unigram model only (what this project trains)."""
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    try:
        proto.ParseFromString(Path(spm_model).read_bytes())
    except Exception as error:  # protobuf's DecodeError: not a sentencepiece model
        raise ValueError(f"{spm_model}: not a sentencepiece model ({error})") from None
    if proto.trainer_spec.model_type != 1:
        raise ValueError(f"{spm_model}: a sentencepiece {proto.TrainerSpec.ModelType.Name(proto.trainer_spec.model_type)} "
                         "model; only unigram models (this project's) export a tokenizer")
    if proto.trainer_spec.byte_fallback:
        raise ValueError(f"{spm_model}: byte fallback is on; fairseq's dict.txt would hold byte pieces this "
                         "export does not map")
    return proto


def sentencepiece_vocabulary(proto, symbols: Sequence[str], dict_path: str = "dict.txt") -> List[Tuple[str, float]]:
    """``(piece, score)`` in fairseq's id order: the four specials, ``dict.txt``'s ``symbols``, ``<mask>``.

    Every normal piece of the model must be a row of ``dict.txt`` and every row a piece (what
    ``write_fairseq_dict`` writes); the specials and ``<mask>`` get score 0 and are matched as
    added tokens, never by the Unigram model.
    """
    NORMAL, USER_DEFINED = 1, 4
    scores = {p.piece: p.score for p in proto.pieces if p.type in (NORMAL, USER_DEFINED)}
    seen = set()
    for line, symbol in enumerate(symbols, start=1):
        if symbol not in scores:
            raise ValueError(f"{dict_path}:{line}: {symbol!r} is not a piece of the sentencepiece model "
                             "(the dictionary belongs to other data, or give --spm-model)")
        seen.add(symbol)
    missing = [piece for piece in scores if piece not in seen]
    if missing:
        raise ValueError(f"{dict_path} lacks {len(missing)} piece(s) of the sentencepiece model (e.g. {missing[0]!r}): "
                         "fairseq reads them as <unk>, which a Hugging Face tokenizer cannot reproduce")
    return [(s, 0.0) for s in SPECIALS] + [(s, scores[s]) for s in symbols] + [(MASK, 0.0)]


def sentencepiece_backend(proto, vocabulary, lowercase: bool = False):
    """A ``tokenizers.Tokenizer`` that pieces text as sentencepiece does (normalizer, whitespace, Viterbi), after
    lower-casing it with ``lowercase`` (as the data was written)."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    spec = proto.normalizer_spec
    if not (spec.add_dummy_prefix and spec.remove_extra_whitespaces and spec.escape_whitespaces):
        raise ValueError("the sentencepiece model has non-default whitespace rules (add_dummy_prefix, "
                         "remove_extra_whitespaces, escape_whitespaces must be on)")
    tokenizer = Tokenizer(models.Unigram(vocabulary, unk_id=SPECIALS.index("<unk>"), byte_fallback=False))
    steps = [normalizers.Strip(left=False, right=True), normalizers.Replace(Regex(" {2,}"), "\u2581")]
    if spec.precompiled_charsmap:
        steps.insert(0, normalizers.Precompiled(spec.precompiled_charsmap))
    if lowercase:
        steps.insert(0, normalizers.Lowercase())
    tokenizer.normalizer = normalizers.Sequence(steps)
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tokenizer.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", 0), ("</s>", 2)])
    return tokenizer


def sentencepiece_tokenizer(transformers, spm_model: Path, symbols: Sequence[str], max_length: int,
                            dict_path: str = "dict.txt"):
    """``PreTrainedTokenizerFast`` giving fairseq's ids for raw text of sentencepiece data (module docstring)."""
    proto = read_sentencepiece(spm_model)
    backend = sentencepiece_backend(proto, sentencepiece_vocabulary(proto, symbols, dict_path),
                                    lowercase=is_lowercased(spm_model))
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend, model_max_length=max_length, bos_token="<s>", eos_token="</s>",
        unk_token="<unk>", pad_token="<pad>", cls_token="<s>", sep_token="</s>", mask_token=MASK)


def sentencepiece_ids(spm_model: Path, dictionary, text: str) -> List[int]:
    """What fairseq was trained on for ``text``: its pieces as the data was written, their ``dict.txt``
    rows, between ``<s>`` and ``</s>`` (the reference the exported tokenizer is checked against); lower-cased
    first where the data was (:func:`is_lowercased`)."""
    text = text.lower() if is_lowercased(spm_model) else text
    pieces = _sentencepiece(*_file_key(spm_model)).encode(text, out_type=str)
    return [dictionary.bos(), *dictionary.encode_line(" ".join(pieces), append_eos=False,
                                                      add_if_not_exist=False).tolist(), dictionary.eos()]


def gpt2_ids(bpe_dir: Path, dictionary, text: str) -> List[int]:
    """fairseq's ids for ``text`` of GPT-2 BPE data: ``<s>``, the GPT-2 labels' ``dict.txt`` rows, ``</s>``
    (as fairseq's RoBERTa and BART hub interfaces encode)."""
    labels = " ".join(map(str, _gpt2_encoder(*_file_key(Path(bpe_dir) / "encoder.json"),
                                             *_file_key(Path(bpe_dir) / "vocab.bpe")).encode(text)))
    return dictionary.encode_line("<s> " + labels + " </s>", append_eos=False, add_if_not_exist=False).tolist()


def _file_key(path) -> tuple:
    """A file's path with its size and modification time: a file rewritten in place is read again."""
    status = Path(path).stat()
    return str(path), status.st_size, status.st_mtime_ns


@lru_cache(maxsize=4)
def _sentencepiece(spm_model: str, size: int, mtime: int):
    """The sentencepiece processor of a model file, loaded once for every sentence checked with it."""
    import sentencepiece as spm
    return spm.SentencePieceProcessor(model_file=spm_model)


@lru_cache(maxsize=4)
def _gpt2_encoder(encoder_json: str, size: int, mtime: int, vocab_bpe: str, bpe_size: int, bpe_mtime: int):
    """fairseq's GPT-2 BPE encoder of an ``encoder.json`` and ``vocab.bpe``, read once."""
    from fairseq.data.encoders.gpt2_bpe_utils import get_encoder
    return get_encoder(encoder_json, vocab_bpe)


def wordpiece_lowercase(directory: Path) -> bool:
    """Whether a BERT tokenizer lower-cases: ``tokenizer_config.json``'s ``do_lower_case`` where the file says so,
    else True (the uncased models, BERT's ``BertTokenizer`` default)."""
    import json

    config = Path(directory) / "tokenizer_config.json"
    if config.is_file():
        return bool(json.loads(config.read_text(encoding="utf-8")).get("do_lower_case", True))
    return True


def wordpiece_pieces(directory: Path, texts: Sequence[str]) -> List[str]:
    """Each text as the space-separated WordPieces of ``DIR/vocab.txt`` (BERT's basic tokenizer, then greedy
    longest-match-first; Devlin et al. 2019, section 3 and its ``tokenization.py``), without ``[CLS]``/``[SEP]``:
    what fairseq-preprocess reads with the converted release's ``dict.txt`` (:mod:`.bert`)."""
    vocab = Path(directory) / "vocab.txt"
    tokenizer = _wordpiece(*_file_key(vocab), wordpiece_lowercase(directory))
    return [" ".join(encoding.tokens) for encoding in tokenizer.encode_batch(list(texts), add_special_tokens=False)]


def wordpiece_ids(directory: Path, dictionary, text: str) -> List[int]:
    """fairseq's ids for ``text`` of WordPiece data: ``<s>``, the pieces' ``dict.txt`` rows, ``</s>``."""
    pieces = wordpiece_pieces(directory, [text])[0]
    return [dictionary.bos(), *dictionary.encode_line(pieces, append_eos=False, add_if_not_exist=False).tolist(),
            dictionary.eos()]


@lru_cache(maxsize=4)
def _wordpiece(vocab: str, size: int, mtime: int, lowercase: bool):
    """``tokenizers``' BERT WordPiece tokenizer of a ``vocab.txt``, read once."""
    from tokenizers import BertWordPieceTokenizer
    return BertWordPieceTokenizer(vocab, lowercase=lowercase)

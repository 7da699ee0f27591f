"""Both directions of ``fairseq-maskplug-convert`` (``preprocess/convert.py`` parses its options): a Hugging Face
RoBERTa or BART directory to a fairseq release (:func:`hf_to_fairseq`), a fairseq checkpoint or release to a Hugging
Face directory with its tokenizer (:func:`fairseq_to_hf`), each written atomically and then loaded by the other
library and compared on :data:`CHECK_SENTENCES` (the token ids identical, the logits within the tolerance). ``args``:
the command's options (``from_hf`` or ``from_fairseq``, ``out``, ``dict``, ``gpt2_bpe``, ``spm_model``, ``head``,
``tolerance``, ``trust_dictionary``)."""

import json
import shutil
from argparse import Namespace
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Tuple

COMMAND = "fairseq-maskplug-convert"  # no output recognised without its owner file: it looks like a model download
CHECK_SENTENCES = (
    "Hello world! This is a test of the conversion.",
    "The movie's plot wasn't great, but the actors (all 12 of them) were superb.",
    "  Leading spaces, trailing spaces   and\ttabs.",
    "Ünïcödé wörds, émojis 🙂 and numbers like 3.14159 or 1,000,000.",
)
FAIRSEQ_ACTIVATION = {"gelu": "gelu", "relu": "relu", "tanh": "tanh", "gelu_new": "gelu_accurate",
                      "gelu_fast": "gelu_accurate"}
HF_ACTIVATION = {"gelu": "gelu", "relu": "relu", "tanh": "tanh", "gelu_accurate": "gelu_new", "gelu_fast": "gelu_new"}


def require(path: Path, what: str) -> Path:
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file ({what})")
    return path


# ---------------------------------------------------------------------------------------------
# how raw text becomes fairseq's ids

@dataclass
class TextIds:
    """The files that turn raw text into the ids a model was trained on: ``dict.txt`` and either GPT-2
    BPE's ``encoder.json``/``vocab.bpe`` (``bpe_dir``), a sentencepiece model (``spm_model``) or a BERT WordPiece
    ``vocab.txt`` (``wordpiece_dir``, :mod:`.bert`)."""
    dict_path: Path
    bpe_dir: Optional[Path] = None
    spm_model: Optional[Path] = None
    wordpiece_dir: Optional[Path] = None

    def dictionary(self):
        """fairseq's dictionary with the ``<mask>`` the masked-LM and BART tasks add."""
        from fairseq.data import Dictionary
        dictionary = Dictionary.load(str(self.dict_path))
        dictionary.add_symbol("<mask>")
        return dictionary

    def ids(self, dictionary, text: str) -> List[int]:
        from .tokenizer import gpt2_ids, sentencepiece_ids, wordpiece_ids
        if self.wordpiece_dir is not None:
            return wordpiece_ids(self.wordpiece_dir, dictionary, text)
        if self.spm_model is not None:
            return sentencepiece_ids(self.spm_model, dictionary, text)
        return gpt2_ids(self.bpe_dir, dictionary, text)


def is_gpt2_dictionary(symbols) -> bool:
    """GPT-2 BPE data's ``dict.txt`` rows are GPT-2 label ids (and ``madeupword`` fillers)."""
    return all(s.isdigit() or s.startswith("madeupword") or s == "<mask>" for s in symbols)


def load_fairseq_checkpoint(path: Path):
    from fairseq import checkpoint_utils

    from ..integration.compat import allow_fairseq_checkpoint_globals
    allow_fairseq_checkpoint_globals()
    return checkpoint_utils.load_checkpoint_to_cpu(str(path))


def checkpoint_model_cfg(state):
    cfg = state.get("cfg", {}).get("model") if state.get("cfg") else None
    cfg = cfg if cfg is not None else state.get("args")
    return cfg if isinstance(cfg, Namespace) else Namespace(**dict(cfg))


# ---------------------------------------------------------------------------------------------
# the check both directions end with

def same_ids(hf_tokenizer, text_ids: TextIds, dictionary, sentence: str, max_positions: int):
    """The sentence's fairseq ids (one row, cut to ``max_positions``) after checking the HF tokenizer gives them."""
    import torch

    fs_ids = text_ids.ids(dictionary, sentence)
    hf_ids = list(hf_tokenizer(sentence)["input_ids"])
    if fs_ids != hf_ids:
        raise ValueError(f"the tokenizers disagree on {sentence!r}: fairseq {fs_ids[:12]}..., hf {hf_ids[:12]}...")
    return torch.tensor(fs_ids[:max_positions]).unsqueeze(0)


def compare_roberta(hf_model, hf_tokenizer, fs_model, text_ids: TextIds, tolerance: float, head) -> float:
    """Largest |logit difference| over the check sentences; raises if tokens differ or it is above tolerance."""
    import torch

    dictionary, worst = text_ids.dictionary(), 0.0
    for sentence in CHECK_SENTENCES:
        tokens = same_ids(hf_tokenizer, text_ids, dictionary, sentence, hf_model.config.max_position_embeddings - 2)
        with torch.no_grad():
            if head is None:
                fs_logits = fs_model(tokens)[0]
            else:
                fs_logits = fs_model(tokens, features_only=True, classification_head_name=head)[0]
            hf_logits = hf_model(input_ids=tokens).logits
        worst = max(worst, (fs_logits.double() - hf_logits.double()).abs().max().item())
    return within(worst, tolerance)


def compare_bart(hf_model, hf_tokenizer, fs_model, text_ids: TextIds, tolerance: float) -> float:
    """Largest difference of the encoder's output and of the decoder's logits, teacher-forced on each check
    sentence as fairseq's denoising task feeds it (``prev_output_tokens``: ``</s>`` then the sentence)."""
    import torch

    dictionary, worst = text_ids.dictionary(), 0.0
    for sentence in CHECK_SENTENCES:
        tokens = same_ids(hf_tokenizer, text_ids, dictionary, sentence, hf_model.config.max_position_embeddings)
        previous = torch.roll(tokens, 1, dims=1)
        lengths = torch.tensor([tokens.shape[1]])
        with torch.no_grad():
            fs_logits = fs_model(tokens, lengths, previous)[0]
            fs_encoded = fs_model.encoder(tokens, src_lengths=lengths)["encoder_out"][0].transpose(0, 1)
            hf = hf_model(input_ids=tokens, decoder_input_ids=previous)
        worst = max(worst, (fs_logits.double() - hf.logits.double()).abs().max().item(),
                    (fs_encoded.double() - hf.encoder_last_hidden_state.double()).abs().max().item())
    return within(worst, tolerance)


def within(worst: float, tolerance: float) -> float:
    if not worst <= tolerance:
        raise ValueError(f"the converted model's logits differ by {worst:.3g} (tolerance {tolerance})")
    return worst


# ---------------------------------------------------------------------------------------------
# HF -> fairseq

def check_hf_weights(src: Path, vocab_size: int) -> None:
    """Refuse, in one line naming the file, a ``model.safetensors`` that is damaged (cut short, not a safetensors
    file) and one whose token embedding's rows disagree with ``config.json``'s ``vocab_size``, before
    ``transformers`` loads them (its errors name no file, or come as a size-mismatch traceback)."""
    weights = src / "model.safetensors"
    if not weights.is_file():
        return
    from safetensors import safe_open

    try:
        with safe_open(str(weights), "pt") as f:
            rows = [f.get_slice(k).get_shape()[0] for k in f.keys()
                    if k.endswith(("embed_tokens.weight", "word_embeddings.weight")) or k == "model.shared.weight"]
    except Exception as error:  # safetensors' own error type: a damaged header or a file cut short
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ValueError(f"{weights} is damaged ({reason}): export or copy it again") from None
    if rows and rows[0] != vocab_size:
        raise ValueError(f"{src / 'config.json'} says vocab_size {vocab_size}, {weights} has {rows[0]} embedding "
                         "rows: the two files belong to different models")


def load_hf_weights(auto, src: Path):
    """``auto.from_pretrained(src)``; a pickled weight file that the safe loader refuses (it would create objects
    that are not tensors) is named in one line, never loaded otherwise (transformers' error names no file and
    suggests turning the safe loader off)."""
    import pickle

    from ..common.checkpoint_files import UnsafeCheckpointError, refused_message

    try:
        return auto.from_pretrained(src)
    except (pickle.UnpicklingError, OSError) as error:
        text = f"{error} {error.__cause__ or ''} {error.__context__ or ''}"
        if isinstance(error, pickle.UnpicklingError) or "Weights only load failed" in text:
            weights = next((src / name for name in ("pytorch_model.bin", "model.bin") if (src / name).exists()), src)
            raise UnsafeCheckpointError(refused_message(str(weights), text)) from None
        raise


def byte_level_bpe(src: Path) -> Tuple[dict, str]:
    """``(vocab, merges)`` of an HF directory's byte-level BPE: ``vocab.json`` + ``merges.txt``, or where those are
    absent (transformers 5's ``save_pretrained`` writes only ``tokenizer.json``) ``tokenizer.json``'s BPE model, its
    added tokens (``<s>`` ... ``<mask>``) joined to the vocabulary, its merges written as ``merges.txt`` holds them."""
    if (src / "vocab.json").is_file() or not (src / "tokenizer.json").is_file():
        vocab = json.loads(require(src / "vocab.json", "the tokenizer's vocabulary (or tokenizer.json, or spm.model + "
                                   "dict.txt)").read_text(encoding="utf-8"))
        return vocab, require(src / "merges.txt", "the tokenizer's BPE merges").read_text(encoding="utf-8")
    spec = json.loads((src / "tokenizer.json").read_text(encoding="utf-8"))
    model = spec.get("model") or {}
    if model.get("type") != "BPE" or (spec.get("pre_tokenizer") or {}).get("type") != "ByteLevel":
        raise ValueError(f"{src / 'tokenizer.json'} holds a {model.get('type')} model with pre-tokenizer "
                         f"{(spec.get('pre_tokenizer') or {}).get('type')}: --from-hf reads GPT-2's byte-level BPE "
                         "(RoBERTa's, BART's, tokenizers' ByteLevelBPETokenizer) or this command's own export")
    vocab = dict(model["vocab"])
    vocab.update({token["content"]: token["id"] for token in spec.get("added_tokens", [])})
    merges = [merge if isinstance(merge, str) else " ".join(merge) for merge in model.get("merges", [])]
    return vocab, "#version: 0.2\n" + "".join(merge + "\n" for merge in merges)


def write_fairseq_vocabulary(src: Path, out: Path, vocab_size: int) -> TextIds:
    """``dict.txt`` and the tokenizer's files of a release directory: this command's ``spm.model`` +
    ``dict.txt`` copied back, else GPT-2 BPE (:func:`byte_level_bpe`)."""
    from . import gpt2_vocab

    check_tokenizer_files(src)
    if (src / "spm.model").is_file() and (src / "dict.txt").is_file():
        copy_sentencepiece(src / "spm.model", out)
        shutil.copyfile(src / "dict.txt", out / "dict.txt")
        rows = len(gpt2_vocab.read_dict_symbols(out / "dict.txt")) + 5
        text_ids = TextIds(out / "dict.txt", spm_model=out / "spm.model")
    else:
        vocab, merges = byte_level_bpe(src)
        encoder, symbols = gpt2_vocab.hf_to_fairseq(vocab)
        gpt2_vocab.write_dict(out / "dict.txt", symbols)
        (out / "encoder.json").write_text(json.dumps(encoder, ensure_ascii=False), encoding="utf-8")
        (out / "vocab.bpe").write_text(merges, encoding="utf-8")
        rows = len(symbols) + 5
        text_ids = TextIds(out / "dict.txt", bpe_dir=out)
    if rows != vocab_size:
        raise ValueError(f"the tokenizer gives {rows} rows with <mask>, config.json vocab_size {vocab_size}")
    return text_ids


def hf_to_fairseq(args) -> str:
    from . import import_transformers
    transformers = import_transformers()

    from . import bart, roberta
    from .release import build_model, save_release
    from ..tools.binarize import atomic_directory

    src = args.from_hf
    config = transformers.AutoConfig.from_pretrained(src)
    if config.model_type == "bert":
        return bert_to_fairseq(transformers, args, config)
    if config.model_type not in ("roberta", "bart"):
        raise ValueError(f"{src}/config.json: model_type {config.model_type!r}; roberta, bart and bert convert")
    is_bart = config.model_type == "bart"
    classifier = any("ForSequenceClassification" in a for a in (config.architectures or []))
    if is_bart and classifier:
        raise ValueError(f"{src}: a BART sequence classifier; BartForConditionalGeneration converts")
    auto = (transformers.AutoModelForSeq2SeqLM if is_bart else
            transformers.AutoModelForSequenceClassification if classifier else transformers.AutoModelForMaskedLM)
    check_hf_weights(src, config.vocab_size)
    hf_model = load_hf_weights(auto, src).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(src)
    head = (args.head or "sentence_classification_head") if classifier else None
    if is_bart:
        model_args = bart.fairseq_args(config)
        state = bart.hf_to_fairseq_state(hf_model.state_dict())
    else:
        model_args = roberta.fairseq_args(config)
        model_args[model_args.index("--activation-fn") + 1] = FAIRSEQ_ACTIVATION[config.hidden_act]
        state = roberta.hf_to_fairseq_state(hf_model.state_dict(), head)

    with atomic_directory(args.out, COMMAND) as out:
        text_ids = write_fairseq_vocabulary(src, out, config.vocab_size)
        fs_model, fs_args = build_model(model_args, out, head, getattr(config, "num_labels", None))
        missing, unexpected = fs_model.load_state_dict(state, strict=False)
        missing = [k for k in missing if not (head and k.startswith("encoder.lm_head."))]
        if missing or unexpected:
            raise ValueError(f"parameters not mapped: missing {missing}, unexpected {unexpected}")
        save_release(out, fs_model, fs_args)
        if is_bart:
            worst = compare_bart(hf_model, tokenizer, fs_model, text_ids, args.tolerance)
        else:
            worst = compare_roberta(hf_model, tokenizer, fs_model, text_ids, args.tolerance, head)
    if is_bart:
        kind = f"BART, {config.encoder_layers}+{config.decoder_layers} layers, dim {config.d_model}"
    else:
        kind = (f"RoBERTa {f'classifier (head {head})' if head else 'masked LM'}, {config.num_hidden_layers} layers, "
                f"dim {config.hidden_size}")
    use = (f"PRETRAINED={args.out} GPT2_BPE={args.out} bash recipes/<recipe>.sh" if text_ids.bpe_dir
           else f"--finetune-from-model {args.out}/model.pt on data written with {args.out}/spm.model")
    return (f"wrote {args.out}: fairseq {kind}, vocabulary {config.vocab_size}; max |logit difference| vs HF "
            f"{worst:.2e}\nuse it: {use}")


#: files of a BERT directory copied into the release: the tokenizer's, and the weights' licence and notice
BERT_FILES = ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json", "LICENSE", "NOTICE")


def bert_to_fairseq(transformers, args, config) -> str:
    """A BERT-type encoder (``BertModel`` or ``BertForMaskedLM``) as a fairseq ``roberta`` release (:mod:`.bert`):
    ``model.pt``, ``dict.txt`` in fairseq's id order, ``vocab.txt`` (raw text -> ids: ``prepare-text --like``) and
    the licence files; checked by the encoder's last hidden states on :data:`CHECK_SENTENCES` (a ``BertModel`` has
    no masked-LM head to compare: the release's is fresh)."""
    import torch

    from . import bert
    from .gpt2_vocab import write_dict
    from .release import build_model, save_release
    from ..tools.binarize import atomic_directory

    src = args.from_hf
    if args.head:
        raise ValueError("--head: a BERT model converts as an encoder with its masked-LM head (fresh where it has "
                         "none); fine-tune it for a classification head")
    tokens = require(src / "vocab.txt", "BERT's WordPiece vocabulary").read_text(encoding="utf-8").splitlines()
    symbols, rows = bert.vocabulary_order(tokens)
    if len(rows) != config.vocab_size:
        raise ValueError(f"{src / 'vocab.txt'} has {len(rows)} tokens, config.json vocab_size {config.vocab_size}")
    model_args = bert.fairseq_args(config)
    model_args[model_args.index("--activation-fn") + 1] = FAIRSEQ_ACTIVATION[config.hidden_act]
    check_hf_weights(src, config.vocab_size)
    masked_lm = any("ForMaskedLM" in a for a in (config.architectures or []))
    hf_model = load_hf_weights(transformers.BertForMaskedLM if masked_lm else transformers.BertModel, src).eval()
    state = bert.hf_to_fairseq_state(hf_model.state_dict(), rows)
    with atomic_directory(args.out, COMMAND) as out:
        write_dict(out / "dict.txt", symbols)
        for name in BERT_FILES:
            if (src / name).is_file():
                shutil.copyfile(src / name, out / name)
        torch.manual_seed(0)  # the fresh masked-LM head of a BertModel: the same for every conversion
        fs_model, fs_args = build_model(model_args, out)
        missing, unexpected = fs_model.load_state_dict(state, strict=False)
        fresh = [k for k in missing if k.startswith("encoder.lm_head.")]
        if unexpected or set(missing) - set(fresh) or (masked_lm and fresh):
            raise ValueError(f"parameters not mapped: missing {missing}, unexpected {unexpected}")
        save_release(out, fs_model, fs_args)
        worst = compare_bert(hf_model, fs_model, TextIds(out / "dict.txt", wordpiece_dir=out), rows, args.tolerance)
    head = "its masked-LM head" if masked_lm else "a fresh masked-LM head (the BERT model had none)"
    return (f"wrote {args.out}: fairseq RoBERTa-shaped encoder from BERT, {config.num_hidden_layers} layers, dim "
            f"{config.hidden_size}, vocabulary {config.vocab_size}, {head}; max |hidden-state difference| vs HF "
            f"{worst:.2e}\nuse it: fairseq-maskplug-prepare-text --like {args.out} ..., then --finetune-from-model "
            f"{args.out}/model.pt (or model.checkpoint in a compare plan)")


def compare_bert(hf_model, fs_model, text_ids: TextIds, rows, tolerance: float) -> float:
    """Largest |difference| of the encoders' last hidden states over the check sentences, fairseq's ids (``dict.txt``)
    mapped to BERT's by ``rows`` (:func:`.bert.vocabulary_order`'s: the BERT row of each fairseq id)."""
    import torch

    dictionary, worst = text_ids.dictionary(), 0.0
    rows = torch.as_tensor(rows)
    encoder = getattr(hf_model, "bert", hf_model)
    for sentence in CHECK_SENTENCES:
        ids = torch.tensor(text_ids.ids(dictionary, sentence)).unsqueeze(0)
        with torch.no_grad():
            fs_hidden = fs_model(ids, features_only=True)[0]
            hf_hidden = encoder(input_ids=rows[ids]).last_hidden_state
        worst = max(worst, (fs_hidden.double() - hf_hidden.double()).abs().max().item())
    return within(worst, tolerance)


# ---------------------------------------------------------------------------------------------
# fairseq -> HF

def find_beside(start: Path, name: str, fallbacks=(), missing: Optional[str] = None) -> Path:
    """``name`` in ``start`` or the first of ``fallbacks`` holding it; else an error (``missing``, or one naming
    the options that give it)."""
    for directory in (start, *fallbacks):
        if directory is not None and (Path(directory) / name).is_file():
            return Path(directory) / name
    raise FileNotFoundError(missing or f"no {name} beside {start}: give its location (--dict / --gpt2-bpe)")


def fairseq_text_ids(args, checkpoint: Path, data: Optional[Path], dict_path: Path, symbols) -> TextIds:
    """GPT-2 BPE files for a dictionary of GPT-2 labels, BERT's WordPiece for a release with ``vocab.txt`` beside it
    (:mod:`.bert`), else the sentencepiece model the data was written with."""
    from ..data.word_boundaries import detect_boundaries

    if args.spm_model is None and args.gpt2_bpe is None and (checkpoint.parent / "vocab.txt").is_file() \
            and detect_boundaries(symbols, nspecial=0) == "wordpiece":
        return TextIds(dict_path, wordpiece_dir=checkpoint.parent)
    if is_gpt2_dictionary(symbols) and args.spm_model is None:
        bpe_dir = args.gpt2_bpe or checkpoint.parent
        require(bpe_dir / "encoder.json", "GPT-2 BPE; give --gpt2-bpe DIR")
        require(bpe_dir / "vocab.bpe", "GPT-2 BPE; give --gpt2-bpe DIR")
        return TextIds(dict_path, bpe_dir=bpe_dir)
    if args.gpt2_bpe is not None:
        raise ValueError(f"{dict_path} holds pieces, not GPT-2 BPE ids (e.g. {symbols[0]!r}): the data was written "
                         "with sentencepiece (--spm-model, not --gpt2-bpe)")
    if args.spm_model is not None:
        return TextIds(dict_path, spm_model=require(args.spm_model, "the sentencepiece model, --spm-model"))
    up = [data, data.parent if data else None, data.parent.parent if data else None]
    return TextIds(dict_path, spm_model=find_beside(
        checkpoint.parent, "spm.model", up,
        missing=f"{dict_path} holds pieces, not GPT-2 BPE ids (e.g. {symbols[0]!r}), and no spm.model is beside "
                f"{checkpoint} or its data: give the sentencepiece model the data was written with (--spm-model), "
                "or --gpt2-bpe DIR for GPT-2 BPE data"))


def checkpoint_and_data(checkpoint: Path):
    """``(state, task options, training data folder)`` of a fairseq checkpoint (the data folder its options name;
    None where they name none or ``.``)."""
    state = load_fairseq_checkpoint(checkpoint)
    task_cfg = state["cfg"]["task"] if state.get("cfg") else None
    data = task_cfg.get("data") if task_cfg is not None else getattr(state.get("args"), "data", None)
    return state, task_cfg, (Path(data) if data and data != "." else None)


def dictionary_beside(checkpoint: Path, data: Optional[Path], missing: Optional[str] = None) -> Path:
    """The ``dict.txt`` of a checkpoint's data: beside the checkpoint, in its training data or that data's
    ``input0/``."""
    return find_beside(checkpoint.parent, "dict.txt", [data, data / "input0" if data else None], missing=missing)


def model_text_ids(model: Path) -> TextIds:
    """How the data of ``model`` (a fairseq checkpoint of this project or a release folder: ``model.pt`` with
    ``dict.txt``) spells text as ids: its ``dict.txt`` (beside it, in its training data or its ``input0/``, checked
    against the checkpoint) and the sentencepiece model or GPT-2 BPE files found as ``--from-fairseq`` finds them
    (``fairseq-maskplug-prepare-text --like`` encodes one's own text with them)."""
    from ..data.dictionaries import check_dictionary_file
    from . import gpt2_vocab

    checkpoint = model / "model.pt" if model.is_dir() else model
    require(checkpoint, "the model: a fairseq checkpoint, or a release folder holding model.pt")
    state, _, data = checkpoint_and_data(checkpoint)
    dict_path = dictionary_beside(checkpoint, data, f"no dict.txt beside {checkpoint} or in its training data {data}")
    check_dictionary_file(state, checkpoint, str(dict_path), False, also=[str(checkpoint.parent / "dict.txt")])
    return fairseq_text_ids(Namespace(spm_model=None, gpt2_bpe=None), checkpoint, data, dict_path,
                            gpt2_vocab.read_dict_symbols(dict_path))


def copy_sentencepiece(spm_model: Path, out: Path) -> None:
    """``spm.model`` into ``out``, with the record of the text's case beside it when there is one
    (:mod:`..common.text_case`): the copy lower-cases raw text as the original does."""
    from ..common.text_case import record_path

    shutil.copyfile(spm_model, out / "spm.model")
    if record_path(spm_model).is_file():
        shutil.copyfile(record_path(spm_model), record_path(out / "spm.model"))


#: what an export records of the files its tokenizer was made from (their SHA-256), checked by ``--from-hf``
EXPORT_RECORD = "maskplug_export.json"
TOKENIZER_FILES = ("dict.txt", "spm.model", "spm.text.json", "vocab.json", "merges.txt")


def record_tokenizer_files(out: Path) -> None:
    """Record in ``out`` the SHA-256 of the tokenizer files the export wrote beside the model (``dict.txt``,
    ``spm.model``, ``spm.text.json``, ``vocab.json``, ``merges.txt``) and the version that wrote them."""
    from .._version import RECORD_KEY, __version__
    from ..common.file_records import file_sha256

    files = {name: file_sha256(str(out / name)) for name in TOKENIZER_FILES if (out / name).is_file()}
    (out / EXPORT_RECORD).write_text(json.dumps({"files": files, RECORD_KEY: __version__}, indent=1) + "\n")



def check_tokenizer_files(src: Path) -> None:
    """Refuse, naming the file, an export whose tokenizer files are not the ones it recorded (copied in from other
    data: a model read with another dictionary gets other ids); a directory without the record (another tool's
    export, an HF download) is read as it is."""
    from ..common.file_records import file_sha256

    record = src / EXPORT_RECORD
    if not record.is_file():
        return
    files = json.loads(record.read_text(encoding="utf-8")).get("files", {})
    for name, digest in files.items():
        if not (src / name).is_file() or file_sha256(str(src / name)) != digest:
            raise ValueError(f"{src / name} is not the file this export was made with ({record} records another): "
                             "the tokenizer files come from other data; copy the export's own back")


def write_hf_tokenizer(transformers, text_ids: TextIds, symbols, out: Path, max_length: int, family: str):
    """The tokenizer of the export (``tokenizer.json`` and its config), with the files ``--from-hf`` reads back."""
    from . import gpt2_vocab
    from .tokenizer import sentencepiece_tokenizer

    if text_ids.spm_model is not None:
        tokenizer = sentencepiece_tokenizer(transformers, text_ids.spm_model, symbols, max_length,
                                            str(text_ids.dict_path))
        copy_sentencepiece(text_ids.spm_model, out)
        shutil.copyfile(text_ids.dict_path, out / "dict.txt")
    else:
        encoder = json.loads((text_ids.bpe_dir / "encoder.json").read_text(encoding="utf-8"))
        vocab = gpt2_vocab.fairseq_to_hf(encoder, symbols)
        (out / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
        shutil.copyfile(text_ids.bpe_dir / "vocab.bpe", out / "merges.txt")
        fast = transformers.BartTokenizerFast if family == "bart" else transformers.RobertaTokenizerFast
        tokenizer = fast.from_pretrained(out, model_max_length=max_length)
    tokenizer.save_pretrained(out)
    record_tokenizer_files(out)


def fairseq_to_hf(args) -> str:
    from . import import_transformers
    transformers = import_transformers()

    from ..data.dictionaries import check_dictionary_file
    from . import bart, gpt2_vocab, roberta

    src = args.from_fairseq
    checkpoint = src / "model.pt" if src.is_dir() else src
    require(checkpoint, "the fairseq checkpoint")
    state, task_cfg, data = checkpoint_and_data(checkpoint)
    model_cfg = checkpoint_model_cfg(state)
    dict_path = args.dict or dictionary_beside(checkpoint, data)
    weights = state["model"]
    check_dictionary_file(state, checkpoint, str(dict_path), args.trust_dictionary,
                          also=[str(checkpoint.parent / "dict.txt")])
    symbols = gpt2_vocab.read_dict_symbols(dict_path)
    text_ids = fairseq_text_ids(args, checkpoint, data, dict_path, symbols)
    if bart.is_bart(weights):
        refuse_t5_sentinels(checkpoint, task_cfg, weights["encoder.embed_tokens.weight"].shape[0], len(symbols))
        return export_bart(transformers, args, checkpoint, model_cfg, weights, text_ids, symbols)
    if roberta.FS + "embed_tokens.weight" not in weights:
        arch = getattr(model_cfg, "_name", None) or getattr(model_cfg, "arch", None) or "another kind of"
        raise ValueError(f"{checkpoint} holds a {arch} model: fairseq RoBERTa encoders and BART encoder-decoders "
                         "convert to Hugging Face")
    return export_roberta(transformers, args, checkpoint, model_cfg, task_cfg, data, weights, text_ids, symbols)


def refuse_t5_sentinels(checkpoint: Path, task_cfg, rows: int, symbols: int) -> None:
    """A ``guided_denoising --target-format t5`` checkpoint's vocabulary ends with T5's sentinels, which the
    exported tokenizer would not know: refused, naming them (before the rows are compared)."""
    if task_cfg is None or task_cfg.get("target_format") != "t5":
        return
    sentinels = rows - symbols - 5
    raise ValueError(f"{checkpoint} was trained with --target-format t5: its {rows} embedding rows are the "
                     f"dictionary's {symbols + 5} with <mask> and {sentinels} T5 sentinels <extra_id_0> ... "
                     f"<extra_id_{sentinels - 1}>, which this export does not give the tokenizer; export a "
                     "checkpoint of --target-format full or masked")


def vocabulary_rows(symbols, rows: int, dict_path: Path) -> None:
    if len(symbols) + 5 != rows:
        raise ValueError(f"{dict_path} gives {len(symbols) + 5} rows with <mask>, the checkpoint has {rows}")


def export_bart(transformers, args, checkpoint: Path, model_cfg, weights, text_ids: TextIds, symbols) -> str:
    from . import bart
    from ..tools.binarize import atomic_directory

    bart.check_exportable(model_cfg, weights)
    vocabulary_rows(symbols, weights["encoder.embed_tokens.weight"].shape[0], text_ids.dict_path)
    heads = sorted({k.split(".")[1] for k in weights if k.startswith("classification_heads.")})
    config = transformers.BartConfig(**bart.hf_config(model_cfg, weights))
    hf_model = transformers.BartForConditionalGeneration(config).eval()
    missing, unexpected = hf_model.load_state_dict(bart.fairseq_to_hf_state(weights), strict=False)
    if missing or unexpected:
        raise ValueError(f"parameters not mapped: missing {missing}, unexpected {unexpected}")
    with atomic_directory(args.out, COMMAND) as out:
        write_hf_tokenizer(transformers, text_ids, symbols, out, config.max_position_embeddings, "bart")
        hf_model.save_pretrained(out)
        reloaded = transformers.AutoModelForSeq2SeqLM.from_pretrained(out).eval()
        fs_model = fairseq_bart(model_cfg, text_ids.dict_path, weights)
        worst = compare_bart(reloaded, transformers.AutoTokenizer.from_pretrained(out), fs_model, text_ids,
                             args.tolerance)
    left = f" (classification heads {heads} not exported)" if heads else ""
    return (f"wrote {args.out}: BartForConditionalGeneration, {config.encoder_layers}+{config.decoder_layers} layers, "
            f"dim {config.d_model}{left}; max |logit difference| vs fairseq {worst:.2e}")


def fairseq_bart(model_cfg, dict_path: Path, weights):
    """The checkpoint's BART rebuilt as plain fairseq BART (to compare logits with)."""
    import tempfile

    from .release import build_model, model_options

    with tempfile.TemporaryDirectory() as tmp:
        shutil.copyfile(dict_path, Path(tmp) / "dict.txt")
        options = model_options(Namespace(**{**vars(model_cfg), "arch": "bart_base"}))
        model, _ = build_model(options, Path(tmp))
    wanted = {k: v for k, v in weights.items() if not k.startswith("classification_heads.")}
    missing, unexpected = model.load_state_dict(wanted, strict=False)
    if [k for k in missing if "output_projection" not in k] or unexpected:
        raise ValueError(f"the checkpoint does not rebuild as fairseq BART: missing {missing}, unexpected {unexpected}")
    return model


def export_roberta(transformers, args, checkpoint: Path, model_cfg, task_cfg, data, weights, text_ids: TextIds,
                   symbols) -> str:
    from . import roberta
    from ..tools.binarize import atomic_directory

    heads = sorted({k.split(".")[1] for k in weights if k.startswith("classification_heads.")})
    head = args.head
    task_name = task_cfg.get("_name") if task_cfg is not None else None
    if head is None and task_name == "sentence_prediction" and len(heads) == 1:
        head = heads[0]
    if head is not None and head not in heads:
        raise ValueError(f"{checkpoint} has no classification head {head!r} (heads: {heads or 'none'})")
    if getattr(model_cfg, "encoder_normalize_before", False) or not getattr(model_cfg, "layernorm_embedding", True):
        raise ValueError("only post-LayerNorm RoBERTa (fairseq's roberta architectures) converts to HF")
    if head is not None and getattr(model_cfg, "pooler_activation_fn", "tanh") != "tanh":
        raise ValueError(f"head {head!r} uses {model_cfg.pooler_activation_fn}: HF's RoBERTa classifier is tanh")
    activation = getattr(model_cfg, "activation_fn", "gelu")
    if activation not in HF_ACTIVATION:
        raise ValueError(f"activation {activation!r} has no HF equivalent")

    shape = roberta.shape_of(weights)
    vocabulary_rows(symbols, shape["vocab"], text_ids.dict_path)
    num_labels = weights[f"classification_heads.{head}.out_proj.weight"].shape[0] if head else None
    config_kwargs = roberta.hf_config(shape, model_cfg.encoder_attention_heads, model_cfg.dropout,
                                      model_cfg.attention_dropout, HF_ACTIVATION[activation], num_labels,
                                      getattr(model_cfg, "layernorm_eps", None))
    labels = label_names(data, num_labels) if head else None
    if labels:
        config_kwargs.update(id2label=dict(enumerate(labels)), label2id={l: i for i, l in enumerate(labels)})
    config = transformers.RobertaConfig(**config_kwargs)
    auto = transformers.RobertaForSequenceClassification if head else transformers.RobertaForMaskedLM
    hf_model = auto(config).eval()
    missing, unexpected = hf_model.load_state_dict(roberta.fairseq_to_hf_state(weights, head), strict=False)
    missing = [k for k in missing if "position_ids" not in k]
    if missing or unexpected:
        raise ValueError(f"parameters not mapped: missing {missing}, unexpected {unexpected}")

    with atomic_directory(args.out, COMMAND) as out:
        write_hf_tokenizer(transformers, text_ids, symbols, out, shape["max_positions"], "roberta")
        hf_model.save_pretrained(out)
        reloaded = (transformers.AutoModelForSequenceClassification if head
                    else transformers.AutoModelForMaskedLM).from_pretrained(out).eval()
        fs_model = fairseq_from_weights(model_cfg, shape, text_ids.dict_path, weights, head, num_labels)
        worst = compare_roberta(reloaded, transformers.AutoTokenizer.from_pretrained(out), fs_model, text_ids,
                                args.tolerance, head)
    kind = f"RobertaForSequenceClassification (head {head}, {num_labels} labels)" if head else "RobertaForMaskedLM"
    return f"wrote {args.out}: {kind}; max |logit difference| vs fairseq {worst:.2e}"


def label_names(data, num_labels: int):
    """Class names of a ``sentence_prediction`` checkpoint (its ``label/dict.txt``), or None."""
    path = Path(data) / "label" / "dict.txt" if data else None
    if path is None or not path.is_file():
        return None
    from .gpt2_vocab import read_dict_symbols
    names = read_dict_symbols(path)
    return names[:num_labels] if len(names) >= num_labels else None


def fairseq_from_weights(model_cfg, shape, dict_path: Path, weights, head, num_labels):
    """The checkpoint's model rebuilt as plain fairseq RoBERTa (to compare logits with)."""
    import tempfile

    from .release import build_model

    model_args = ["--arch", "roberta_base", "--encoder-layers", str(shape["layers"]),
                  "--encoder-embed-dim", str(shape["dim"]), "--encoder-ffn-embed-dim", str(shape["ffn"]),
                  "--encoder-attention-heads", str(model_cfg.encoder_attention_heads),
                  "--max-positions", str(shape["max_positions"]),
                  "--activation-fn", getattr(model_cfg, "activation_fn", "gelu")]
    if getattr(model_cfg, "layernorm_eps", None) is not None:
        model_args += ["--layernorm-eps", repr(float(model_cfg.layernorm_eps))]
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copyfile(dict_path, Path(tmp) / "dict.txt")
        model, _ = build_model(model_args, Path(tmp), head, num_labels)
    wanted = {k: v for k, v in weights.items()
              if not k.startswith("classification_heads.") or k.startswith(f"classification_heads.{head}.")}
    model.load_state_dict(wanted, strict=True)
    return model

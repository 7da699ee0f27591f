"""Convert RoBERTa models between Hugging Face and fairseq (GPT-2 BPE vocabularies).

    python -m preprocess.convert --from-hf HF_DIR --to fairseq OUT
    python -m preprocess.convert --from-fairseq CHECKPOINT_OR_DIR --to hf OUT

``--to fairseq`` writes a release directory as fairseq publishes them (``model.pt`` with its
``args``, ``dict.txt``, and the GPT-2 BPE files ``encoder.json`` and ``vocab.bpe``): the
recipes take it as ``PRETRAINED=OUT GPT2_BPE=OUT``. An HF sequence classifier becomes a
fairseq model with the classification head ``--head`` (default ``sentence_classification_head``,
the name fairseq's ``sentence_prediction`` task uses).

``--to hf`` reads a release directory or any RoBERTa checkpoint trained here; the dictionary is
``--dict`` (default: ``dict.txt`` beside the checkpoint, else in the checkpoint's data directory)
and the BPE files come from ``--gpt2-bpe`` (default: beside the checkpoint). It writes a
directory that ``AutoModelForMaskedLM.from_pretrained`` loads, or, for a fine-tuned classifier
(``--head NAME``; the one head of a ``sentence_prediction`` checkpoint by default),
``AutoModelForSequenceClassification``, with the matching tokenizer.

Both directions then load the written model with the other library, run both on sentences
encoded by both tokenizers, and stop with an error unless the token ids are identical and the
logits agree within ``--tolerance``; the largest difference is printed.
Needs the ``[hf]`` extra (``pip install -e '.[hf]'``).
"""

import argparse
import json
import shutil
import sys
from argparse import Namespace
from pathlib import Path

from fairseq_maskplug.common.option_ranges import number

from . import HelpFormatter, add_user_dir, configure_tool_output, import_user_dir

CHECK_SENTENCES = (
    "Hello world! This is a test of the conversion.",
    "The movie's plot wasn't great, but the actors (all 12 of them) were superb.",
    "  Leading spaces, trailing spaces   and\ttabs.",
    "Ünïcödé wörds, émojis 🙂 and numbers like 3.14159 or 1,000,000.",
)
FAIRSEQ_ACTIVATION = {"gelu": "gelu", "relu": "relu", "tanh": "tanh", "gelu_new": "gelu_accurate",
                      "gelu_fast": "gelu_accurate"}
HF_ACTIVATION = {"gelu": "gelu", "relu": "relu", "tanh": "tanh", "gelu_accurate": "gelu_new", "gelu_fast": "gelu_new"}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--from-hf", type=Path, metavar="DIR",
                        help="HF RoBERTa directory (config.json, model.safetensors, vocab.json, merges.txt)")
    source.add_argument("--from-fairseq", type=Path, metavar="PATH",
                        help="fairseq RoBERTa: a release directory (model.pt) or a checkpoint file")
    parser.add_argument("--to", nargs=2, required=True, metavar=("FORMAT", "OUT"),
                        help="'fairseq OUT' or 'hf OUT': the output directory (new or empty, or this command's "
                             "earlier output, which is replaced atomically)")
    parser.add_argument("--dict", type=Path, default=None, help="fairseq dict.txt of the model (with --from-fairseq)")
    parser.add_argument("--gpt2-bpe", type=Path, default=None,
                        help="directory with encoder.json and vocab.bpe (with --from-fairseq; default: beside it)")
    parser.add_argument("--head", default=None,
                        help="classification head: exported as a sequence classifier (--to hf), or the name "
                             "an HF classifier's head gets (--to fairseq; default sentence_classification_head)")
    parser.add_argument("--tolerance", type=number("[0, inf)", float),
                        default=1e-4, help="largest logit difference accepted")
    parser.add_argument("--trust-dictionary", action="store_true",
                        help="accept --dict when the checkpoint records no dictionary fingerprint and no dict.txt "
                             "is found beside it or in its training data (otherwise refused: a reordered dict.txt "
                             "of the same size would export a tokenizer with other ids)")
    add_user_dir(parser)
    args = parser.parse_args(argv)
    fmt = args.to[0]
    if fmt not in ("fairseq", "hf"):
        parser.error(f"--to {fmt}: the format is fairseq or hf")
    if (fmt == "fairseq") != (args.from_hf is not None):
        parser.error("convert --from-hf with --to fairseq, --from-fairseq with --to hf")
    if args.from_hf is not None and (args.dict or args.gpt2_bpe):
        parser.error("--dict and --gpt2-bpe belong to --from-fairseq (an HF directory has vocab.json, merges.txt)")
    args.out = Path(args.to[1])
    return args


def require(path: Path, what: str) -> Path:
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file ({what})")
    return path


# ---------------------------------------------------------------------------------------------
# fairseq side

def fairseq_encode(directory: Path, dictionary, sentence: str):
    """Token ids as fairseq's RoBERTa hub interface makes them: <s> GPT-2 BPE labels </s>."""
    from fairseq.data.encoders.gpt2_bpe_utils import get_encoder

    bpe = get_encoder(str(directory / "encoder.json"), str(directory / "vocab.bpe"))
    labels = " ".join(map(str, bpe.encode(sentence)))
    return dictionary.encode_line("<s> " + labels + " </s>", append_eos=False, add_if_not_exist=False).long()


def load_fairseq_checkpoint(path: Path):
    from fairseq import checkpoint_utils

    from fairseq_maskplug.integration.compat import allow_fairseq_checkpoint_globals
    allow_fairseq_checkpoint_globals()
    return checkpoint_utils.load_checkpoint_to_cpu(str(path))


def checkpoint_model_cfg(state):
    cfg = state["cfg"]["model"]
    return cfg if isinstance(cfg, Namespace) else Namespace(**dict(cfg))


# ---------------------------------------------------------------------------------------------
# the check both directions end with

def compare(hf_model, hf_tokenizer, fs_model, fs_dir: Path, fs_dictionary, tolerance: float, head) -> float:
    """Largest |logit difference| over the check sentences; raises if tokens differ or it is above tolerance."""
    import torch

    worst = 0.0
    for sentence in CHECK_SENTENCES:
        fs_ids = fairseq_encode(fs_dir, fs_dictionary, sentence)
        hf_ids = hf_tokenizer(sentence)["input_ids"]
        if fs_ids.tolist() != list(hf_ids):
            raise ValueError(f"the tokenizers disagree on {sentence!r}: fairseq {fs_ids.tolist()[:12]}..., "
                             f"hf {list(hf_ids)[:12]}...")
        tokens = fs_ids[: hf_model.config.max_position_embeddings - 2].unsqueeze(0)
        with torch.no_grad():
            if head is None:
                fs_logits = fs_model(tokens)[0]
            else:
                fs_logits = fs_model(tokens, features_only=True, classification_head_name=head)[0]
            hf_logits = hf_model(input_ids=tokens).logits
        worst = max(worst, (fs_logits.double() - hf_logits.double()).abs().max().item())
    if not worst <= tolerance:
        raise ValueError(f"the converted model's logits differ by {worst:.3g} (tolerance {tolerance})")
    return worst


# ---------------------------------------------------------------------------------------------
# HF -> fairseq

def load_hf_weights(auto, src: Path):
    """``auto.from_pretrained(src)``; a pickled weight file that the safe loader refuses (it would create objects
    that are not tensors) is named in one line, never loaded otherwise (transformers' error names no file and
    suggests turning the safe loader off)."""
    import pickle

    from fairseq_maskplug.common.checkpoint_files import UnsafeCheckpointError, refused_message

    try:
        return auto.from_pretrained(src)
    except (pickle.UnpicklingError, OSError) as error:
        text = f"{error} {error.__cause__ or ''} {error.__context__ or ''}"
        if isinstance(error, pickle.UnpicklingError) or "Weights only load failed" in text:
            weights = next((src / name for name in ("pytorch_model.bin", "model.bin") if (src / name).exists()), src)
            raise UnsafeCheckpointError(refused_message(str(weights), text)) from None
        raise


def hf_to_fairseq(args) -> str:
    from fairseq_maskplug.interop import import_transformers
    transformers = import_transformers()
    from fairseq.data import Dictionary

    from fairseq_maskplug.interop import gpt2_vocab, roberta
    from fairseq_maskplug.interop.release import build_model, save_release

    src = args.from_hf
    config = transformers.AutoConfig.from_pretrained(src)
    if config.model_type != "roberta":
        raise ValueError(f"{src}/config.json: model_type {config.model_type!r}; only roberta converts")
    classifier = any("ForSequenceClassification" in a for a in (config.architectures or []))
    auto = transformers.AutoModelForSequenceClassification if classifier else transformers.AutoModelForMaskedLM
    hf_model = load_hf_weights(auto, src).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(src)
    vocab = json.loads(require(src / "vocab.json", "the tokenizer's vocabulary").read_text(encoding="utf-8"))
    merges = require(src / "merges.txt", "the tokenizer's BPE merges")
    encoder, symbols = gpt2_vocab.hf_to_fairseq(vocab)
    if len(symbols) + 5 != config.vocab_size:
        raise ValueError(f"vocab.json has {len(symbols) + 5} rows, config.json vocab_size {config.vocab_size}")
    head = (args.head or "sentence_classification_head") if classifier else None
    model_args = roberta.fairseq_args(config)
    model_args[model_args.index("--activation-fn") + 1] = FAIRSEQ_ACTIVATION[config.hidden_act]
    state = roberta.hf_to_fairseq_state(hf_model.state_dict(), head)

    from fairseq_maskplug.tools.binarize import atomic_directory
    with atomic_directory(args.out, COMMAND) as out:
        gpt2_vocab.write_dict(out / "dict.txt", symbols)
        (out / "encoder.json").write_text(json.dumps(encoder, ensure_ascii=False), encoding="utf-8")
        shutil.copyfile(merges, out / "vocab.bpe")
        fs_model, fs_args = build_model(model_args, out, head, getattr(config, "num_labels", None))
        missing, unexpected = fs_model.load_state_dict(state, strict=False)
        missing = [k for k in missing if not (head and k.startswith("encoder.lm_head."))]
        if missing or unexpected:
            raise ValueError(f"parameters not mapped: missing {missing}, unexpected {unexpected}")
        save_release(out, fs_model, fs_args)
        dictionary = Dictionary.load(str(out / "dict.txt"))
        dictionary.add_symbol("<mask>")
        worst = compare(hf_model, tokenizer, fs_model, out, dictionary, args.tolerance, head)
    kind = f"classifier (head {head})" if head else "masked LM"
    return (f"wrote {args.out}: fairseq RoBERTa {kind}, {config.num_hidden_layers} layers, dim "
            f"{config.hidden_size}, vocabulary {config.vocab_size}; max |logit difference| vs HF {worst:.2e}\n"
            f"use it: PRETRAINED={args.out} GPT2_BPE={args.out} bash recipes/<recipe>.sh")


# ---------------------------------------------------------------------------------------------
# fairseq -> HF

def find_beside(start: Path, name: str, fallbacks=()) -> Path:
    for directory in (start, *fallbacks):
        if directory is not None and (Path(directory) / name).is_file():
            return Path(directory) / name
    raise FileNotFoundError(f"no {name} beside {start}: give its location (--dict / --gpt2-bpe)")


def fairseq_to_hf(args) -> str:
    from fairseq_maskplug.interop import import_transformers
    transformers = import_transformers()
    from fairseq.data import Dictionary

    from fairseq_maskplug.data.dictionaries import check_dictionary_file
    from fairseq_maskplug.interop import gpt2_vocab, roberta

    src = args.from_fairseq
    checkpoint = src / "model.pt" if src.is_dir() else src
    require(checkpoint, "the fairseq checkpoint")
    state = load_fairseq_checkpoint(checkpoint)
    model_cfg = checkpoint_model_cfg(state)
    task_cfg = state["cfg"]["task"]
    data = task_cfg.get("data") if task_cfg is not None else None
    data = Path(data) if data else None  # the training data directory the checkpoint names
    dict_path = args.dict or find_beside(checkpoint.parent, "dict.txt",
                                        [data, data / "input0" if data else None])
    bpe_dir = args.gpt2_bpe or checkpoint.parent
    require(bpe_dir / "encoder.json", "GPT-2 BPE; give --gpt2-bpe DIR")
    require(bpe_dir / "vocab.bpe", "GPT-2 BPE; give --gpt2-bpe DIR")
    weights = state["model"]
    if roberta.FS + "embed_tokens.weight" not in weights:
        arch = getattr(model_cfg, "_name", None) or getattr(model_cfg, "arch", None) or "another kind of"
        raise ValueError(f"{checkpoint} holds a {arch} model: only fairseq RoBERTa encoders convert to Hugging Face "
                         "(BART and other encoder-decoders do not, here)")
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

    check_dictionary_file(state, checkpoint, str(dict_path), args.trust_dictionary,
                          also=[str(checkpoint.parent / "dict.txt")])
    shape = roberta.shape_of(weights)
    symbols = gpt2_vocab.read_dict_symbols(dict_path)
    pieces = [s for s in symbols if not s.isdigit() and not s.startswith("madeupword") and s != "<mask>"]
    if pieces:
        raise ValueError(f"{dict_path} holds symbols that are not GPT-2 BPE ids (e.g. {pieces[0]!r}): only GPT-2 BPE "
                         "RoBERTa models convert to Hugging Face (a sentencepiece model, like the demo's, does not)")
    if len(symbols) + 5 != shape["vocab"]:
        raise ValueError(f"{dict_path} gives {len(symbols) + 5} rows with <mask>, the checkpoint has {shape['vocab']}")
    encoder = json.loads((bpe_dir / "encoder.json").read_text(encoding="utf-8"))
    vocab = gpt2_vocab.fairseq_to_hf(encoder, symbols)
    num_labels = weights[f"classification_heads.{head}.out_proj.weight"].shape[0] if head else None
    config_kwargs = roberta.hf_config(shape, model_cfg.encoder_attention_heads, model_cfg.dropout,
                                      model_cfg.attention_dropout, HF_ACTIVATION[activation], num_labels)
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

    from fairseq_maskplug.tools.binarize import atomic_directory
    with atomic_directory(args.out, COMMAND) as out:
        (out / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
        shutil.copyfile(bpe_dir / "vocab.bpe", out / "merges.txt")
        tokenizer = transformers.RobertaTokenizer.from_pretrained(out, model_max_length=shape["max_positions"])
        hf_model.save_pretrained(out)
        tokenizer.save_pretrained(out)
        reloaded = (transformers.AutoModelForSequenceClassification if head
                    else transformers.AutoModelForMaskedLM).from_pretrained(out).eval()
        fs_model = fairseq_from_weights(model_cfg, shape, dict_path, weights, head, num_labels)
        dictionary = Dictionary.load(str(dict_path))
        dictionary.add_symbol("<mask>")
        worst = compare(reloaded, transformers.AutoTokenizer.from_pretrained(out), fs_model, bpe_dir, dictionary,
                        args.tolerance, head)
    kind = f"RobertaForSequenceClassification (head {head}, {num_labels} labels)" if head else "RobertaForMaskedLM"
    return f"wrote {args.out}: {kind}; max |logit difference| vs fairseq {worst:.2e}"


def label_names(data, num_labels: int):
    """Class names of a ``sentence_prediction`` checkpoint (its ``label/dict.txt``), or None."""
    path = Path(data) / "label" / "dict.txt" if data else None
    if path is None or not path.is_file():
        return None
    from fairseq_maskplug.interop.gpt2_vocab import read_dict_symbols
    names = read_dict_symbols(path)
    return names[:num_labels] if len(names) >= num_labels else None


def fairseq_from_weights(model_cfg, shape, dict_path: Path, weights, head, num_labels):
    """The checkpoint's model rebuilt as plain fairseq RoBERTa (to compare logits with)."""
    import tempfile

    from fairseq_maskplug.interop.release import build_model

    model_args = ["--arch", "roberta_base", "--encoder-layers", str(shape["layers"]),
                  "--encoder-embed-dim", str(shape["dim"]), "--encoder-ffn-embed-dim", str(shape["ffn"]),
                  "--encoder-attention-heads", str(model_cfg.encoder_attention_heads),
                  "--max-positions", str(shape["max_positions"]),
                  "--activation-fn", getattr(model_cfg, "activation_fn", "gelu")]
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copyfile(dict_path, Path(tmp) / "dict.txt")
        model, _ = build_model(model_args, Path(tmp), head, num_labels)
    wanted = {k: v for k, v in weights.items()
              if not k.startswith("classification_heads.") or k.startswith(f"classification_heads.{head}.")}
    model.load_state_dict(wanted, strict=True)
    return model


COMMAND = "fairseq-maskplug-convert"  # no output recognised without its owner file: it looks like a model download


def main(argv=None) -> int:
    args = parse_args(argv)
    configure_tool_output()
    try:
        import_user_dir(args.user_dir)
        from fairseq_maskplug.common.atomic import check_output_directory
        check_output_directory(args.out, "--to", COMMAND, [
            ("--from-hf", args.from_hf), ("--from-fairseq", args.from_fairseq), ("--dict", args.dict),
            ("--gpt2-bpe", args.gpt2_bpe)])
        if args.from_hf is not None:
            require(args.from_hf / "config.json", "an HF model directory")
            message = hf_to_fairseq(args)
        else:
            message = fairseq_to_hf(args)
    except (ValueError, OSError, ImportError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(message, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

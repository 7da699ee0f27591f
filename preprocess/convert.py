"""Convert RoBERTa and BART models between Hugging Face and fairseq, with their tokenizers.

    python -m preprocess.convert --from-hf HF_DIR --to fairseq OUT
    python -m preprocess.convert --from-fairseq CHECKPOINT_OR_DIR --to hf OUT

Models: fairseq ``roberta`` (masked LM, or a classifier with ``--head``) <-> HF
``RobertaForMaskedLM`` / ``RobertaForSequenceClassification``; fairseq ``bart`` (a release,
or any checkpoint ``guided_denoising`` writes) <-> HF ``BartForConditionalGeneration``; and one way, a BERT-type
encoder (HF ``BertModel``, e.g. all-MiniLM-L6-v2, or ``BertForMaskedLM``) -> fairseq ``roberta`` with BERT's
``vocab.txt`` beside it (``prepare-text --like OUT`` writes text with it; a ``BertModel``'s masked-LM head is fresh;
compared by the encoders' hidden states; ``fairseq_maskplug.interop.bert``).

Tokenizers: the export writes the tokenizer that gives fairseq's ids for raw text
(``tokenizer.json``, loaded by ``AutoTokenizer``): for GPT-2 BPE data (fairseq's releases) from
``encoder.json``/``vocab.bpe`` (``--gpt2-bpe``, default beside the checkpoint) as ``vocab.json``,
``merges.txt``; for sentencepiece data (the demo's, ``prepare-text``'s) from the sentencepiece
model (``--spm-model``, default ``spm.model`` beside the checkpoint or its training data, or
one directory up) and ``dict.txt``, both copied into the export so ``--from-hf`` can bring it
back. The dictionary is ``--dict`` (default: ``dict.txt`` beside the checkpoint, else in the
checkpoint's data directory).

``--to fairseq`` writes a release directory as fairseq publishes them (``model.pt`` with its
``args``, ``dict.txt``, and ``encoder.json`` + ``vocab.bpe`` or ``spm.model``): the recipes take a
GPT-2 BPE one as ``PRETRAINED=OUT GPT2_BPE=OUT``. An HF sequence classifier becomes a fairseq
model with the classification head ``--head`` (default ``sentence_classification_head``, the
name fairseq's ``sentence_prediction`` task uses).

Both directions then load the written model with the other library, run both on sentences
encoded by both tokenizers (fairseq's ids: its GPT-2 BPE encoder, or the sentencepiece model and
``dict.txt`` the data was written with), and stop with an error unless the token ids are
identical and the logits agree within ``--tolerance`` (BART: the encoder's output and the
decoder's logits, teacher-forced on the sentence); the largest difference is printed.
HF weights are written as ``model.safetensors``. Needs the ``[hf]`` extra (``MASKPLUG_EXTRAS=hf bash recipes/setup_env.sh``).
"""

import argparse
import sys
from pathlib import Path

from fairseq_maskplug.common.option_ranges import number

from . import HelpFormatter, add_version, add_user_dir, configure_tool_output, import_user_dir


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    add_version(parser)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--from-hf", type=Path, metavar="DIR",
                        help="HF RoBERTa or BART directory (config.json, model.safetensors, and vocab.json + "
                             "merges.txt, or this command's spm.model + dict.txt)")
    source.add_argument("--from-fairseq", type=Path, metavar="PATH",
                        help="fairseq RoBERTa or BART: a release directory (model.pt) or a checkpoint file")
    parser.add_argument("--to", nargs=2, required=True, metavar=("FORMAT", "OUT"),
                        help="'fairseq OUT' or 'hf OUT': the output directory (new or empty, or this command's "
                             "earlier output, which is replaced atomically)")
    parser.add_argument("--dict", type=Path, default=None, help="fairseq dict.txt of the model (with --from-fairseq)")
    parser.add_argument("--gpt2-bpe", type=Path, default=None,
                        help="directory with encoder.json and vocab.bpe (with --from-fairseq, GPT-2 BPE data; "
                             "default: beside it)")
    parser.add_argument("--spm-model", type=Path, default=None,
                        help="the sentencepiece model the data was written with (with --from-fairseq, "
                             "sentencepiece data; default: spm.model beside the checkpoint, in its data "
                             "directory, or one or two directories above that)")
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
    if args.from_hf is not None and (args.dict or args.gpt2_bpe or args.spm_model):
        parser.error("--dict, --gpt2-bpe and --spm-model belong to --from-fairseq (an HF directory holds its tokenizer)")
    if args.gpt2_bpe is not None and args.spm_model is not None:
        parser.error("--gpt2-bpe or --spm-model: the data was written with one of them")
    args.out = Path(args.to[1])
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    configure_tool_output()
    try:
        import_user_dir(args.user_dir)
        from fairseq_maskplug.common.atomic import check_output_directory
        from fairseq_maskplug.interop.convert import COMMAND, fairseq_to_hf, hf_to_fairseq, require

        check_output_directory(args.out, "--to", COMMAND, [
            ("--from-hf", args.from_hf), ("--from-fairseq", args.from_fairseq), ("--dict", args.dict),
            ("--gpt2-bpe", args.gpt2_bpe), ("--spm-model", args.spm_model)])
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

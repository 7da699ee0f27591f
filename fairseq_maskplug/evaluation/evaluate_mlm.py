"""Masked-LM loss of checkpoints under one fixed masking, so that runs trained with
different masking (MLM, FE-MLM subword or span, guided policies) compare fairly.

    fairseq-maskplug-evaluate-mlm --data data-bin --split valid ck/checkpoint_1_50.pt ...

Every checkpoint is scored on the same blocks (the checkpoint's own blocking options)
with the same ``guided_mlm --mask-policy random`` masks (``--mask-prob``, ``--seed``,
epoch 1); prints one JSON line per checkpoint: ``{"checkpoint", "updates", "loss", "units",
"masked"}``, the loss in bits per masked token (base 2, as fairseq logs it; ``units`` says so) over
``masked`` masked tokens. ``--unigram-from CORPUS`` adds ``unigram_loss``: the loss on the same masked tokens of a
model that knows only CORPUS's token frequencies (:func:`unigram_bits`, add-one smoothed over the dictionary), the
plateau a masked LM reaches before it uses context; a checkpoint near it has learned little beyond frequencies (the
quickstart's general model: 10.745 bits against the news unigram's 10.752 on MR's valid text, 2026-12-02).
``--words-from LEXICON_JSON`` adds ``words_loss`` and ``words_masked``: the loss over the masked tokens that lie
inside a renamed lexicon's pseudo-words (``fairseq-maskplug-rename-lexicon``'s record), issue 100's third outcome.
"""

import argparse
import json
import math
import os
import sys

import torch

from ..common.atomic import write_text
from ..common.option_ranges import number
from ..tools.cli import HelpFormatter, add_user_dir, add_version, command_main, import_user_dir, split_name


def unigram_bits(counts: "torch.Tensor") -> "torch.Tensor":
    """``-log2 p(token)`` for every token id of a unigram model with add-one smoothing over ``counts`` (one count per
    dictionary entry): the loss, in bits, of a masked LM that predicts every masked token from frequencies alone."""
    counts = torch.as_tensor(counts, dtype=torch.float64)
    if counts.dim() != 1 or counts.numel() == 0 or bool((counts < 0).any()):
        raise ValueError("counts must be a non-empty 1-d tensor of non-negative counts")
    smoothed = counts + 1
    return -torch.log2(smoothed / smoothed.sum())


def token_counts(data: str, split: str = "train") -> "torch.Tensor":
    """How often each id of ``data``'s dictionary occurs in its binarized ``split`` (``data``: a masked-LM folder);
    ``<s>``, ``<pad>`` and ``</s>`` are not counted (never a masked target)."""
    from fairseq.data import Dictionary, data_utils

    dictionary = Dictionary.load(os.path.join(data, "dict.txt"))
    dataset = data_utils.load_indexed_dataset(os.path.join(data, split), dictionary)
    if dataset is None:
        raise FileNotFoundError(f"--unigram-from {data}: no binarized {split} split")
    counts = torch.zeros(len(dictionary), dtype=torch.float64)
    for index in range(len(dataset)):
        counts += torch.bincount(dataset[index].long(), minlength=len(dictionary)).double()
    counts[[dictionary.bos(), dictionary.pad(), dictionary.eos()]] = 0
    return counts


class FixedMaskScorer:
    """Scores checkpoints on ``split`` of ``data`` under ``guided_mlm`` random masks at a fixed seed.

    The masked dataset is built once per blocking configuration (all checkpoints of a
    run share one) and every checkpoint is read from disk once.
    """

    def __init__(self, data: str, split: str = "valid", mask_prob: float = 0.15, seed: int = 1,
                 batch_size: int = 32, unigram: "torch.Tensor" = None, words=None):
        """``unigram``: a corpus's :func:`token_counts` (its dictionary the scored data's, before the task's added
        ``<mask>``), for ``unigram_loss``; ``words``: ``(id tuples, word-start symbols, nspecial)`` of words whose
        masked tokens are also scored apart (``words_loss``: a renamed lexicon's pseudo-words)."""
        import fairseq_maskplug.plugin  # noqa: F401  (registers the tasks with fairseq)

        self.data, self.split, self.mask_prob, self.seed, self.batch_size = data, split, mask_prob, seed, batch_size
        self.unigram = unigram  # token_counts of a corpus: each score adds unigram_loss on the same masked tokens
        self.words = words
        self._tasks = {}

    def _task(self, tokens_per_sample, sample_break_mode, shorten_method):
        key = (tokens_per_sample, sample_break_mode, shorten_method)
        if key not in self._tasks:
            from fairseq import options, tasks
            from fairseq.dataclass.utils import convert_namespace_to_omegaconf

            args = options.parse_args_and_arch(options.get_training_parser(), [
                self.data, "--task", "guided_mlm", "--mask-policy", "random", "--mask-prob", str(self.mask_prob),
                "--seed", str(self.seed), "--arch", "roberta_base", "--tokens-per-sample", str(tokens_per_sample),
                "--sample-break-mode", str(sample_break_mode), "--shorten-method", str(shorten_method)])
            task = tasks.setup_task(convert_namespace_to_omegaconf(args).task)
            task.load_dataset(self.split)
            self._tasks[key] = task
        return self._tasks[key]

    def _unigram_bits(self, size: int) -> "torch.Tensor":
        """:func:`unigram_bits` over the task's dictionary of ``size`` entries: the symbols it adds to the corpus's
        (``<mask>``) counted 0 times."""
        if self.unigram.numel() > size:
            raise ValueError(f"--unigram-from: its dictionary has {self.unigram.numel()} entries, the scored "
                             f"data's {size}")
        return unigram_bits(torch.cat([self.unigram, self.unigram.new_zeros(size - self.unigram.numel())]))

    @torch.no_grad()
    def score(self, checkpoint: str) -> dict:
        from fairseq import checkpoint_utils, utils

        overrides = {"data": self.data}
        state = checkpoint_utils.load_checkpoint_to_cpu(checkpoint, overrides)
        try:
            models, saved, _ = checkpoint_utils.load_model_ensemble_and_task([checkpoint], overrides, state=state)
        except Exception as error:  # fairseq wraps torch's size mismatch: data of another dictionary (issue 104)
            cause = f"{error} {error.__cause__ or ''} {error.__context__ or ''}"
            if "size mismatch for " not in cause:
                raise
            first = cause.split("size mismatch for ", 1)[1].splitlines()[0].strip()
            raise ValueError(f"{checkpoint}: its parameters do not fit --data {self.data}'s dictionary (size mismatch "
                             f"for {first}): score data written with the model's own dictionary "
                             f"(fairseq-maskplug-prepare-text --like {checkpoint})") from None
        model = models[0].eval()
        if torch.cuda.is_available():
            model = model.cuda()
        task = self._task(saved.task.tokens_per_sample, saved.task.sample_break_mode, saved.task.shorten_method)
        # a fresh iterator for every checkpoint: fairseq's cached one would move on to epoch 2, 3, ... on each
        # next_epoch_itr, and the masks (drawn from seed, epoch and index) with it
        batches = task.get_batch_iterator(task.dataset(self.split), max_sentences=self.batch_size, seed=self.seed,
                                          epoch=1, disable_iterator_cache=True).next_epoch_itr(shuffle=False)
        total, unigram, count, in_words, words_count = 0.0, 0.0, 0, 0.0, 0
        bits = self._unigram_bits(len(task.source_dictionary)) if self.unigram is not None else None
        for sample in batches:
            if torch.cuda.is_available():
                sample = utils.move_to_cuda(sample)
            masked = sample["target"].ne(task.source_dictionary.pad())
            logits = model(**sample["net_input"], masked_tokens=masked)[0]
            losses = torch.nn.functional.cross_entropy(logits.float(), sample["target"][masked], reduction="none")
            total += float(losses.sum())
            if bits is not None:
                unigram += float(bits[sample["target"][masked].cpu()].sum())
            count += int(masked.sum())
            if self.words is not None:
                inside = self._inside_words(sample, masked, task.source_dictionary.pad())[masked.cpu()]
                in_words += float(losses.cpu()[inside].sum())
                words_count += int(inside.sum())
        scores = {"checkpoint": checkpoint, "updates": int(state["optimizer_history"][-1]["num_updates"]),
                  "loss": total / count / math.log(2), "units": "bits per masked token", "masked": count}
        if self.unigram is not None:
            scores["unigram_loss"] = unigram / count
        if self.words is not None:
            scores["words_loss"] = in_words / words_count / math.log(2) if words_count else None
            scores["words_masked"] = words_count
        return scores

    def _inside_words(self, sample, masked, pad: int) -> "torch.Tensor":
        """Per position of the batch, whether it lies inside one of :attr:`words` in the uncorrupted text (the
        masked positions' targets put back into the input)."""
        from ..data.renamed_lexicon import word_positions

        words, starts, nspecial = self.words
        original = torch.where(masked, sample["target"], sample["net_input"]["src_tokens"]).cpu()
        inside = torch.zeros_like(original, dtype=torch.bool)
        for row, tokens in enumerate(original):
            kept = tokens.ne(pad)
            inside[row, kept] = torch.from_numpy(word_positions(tokens[kept].numpy(), words, starts, nspecial))
        return inside


def scores_parts(data: dict) -> dict:
    """The page parts of stored scores of this command (``"kind": "mlm_scores"``: ``rows`` of a model's name beside
    one JSON line of this command): ``{"table": [heading, lines...]}``, as ``benchmarks/pages.py`` renders a stored
    result. The pseudo-word columns show where the scores have them (``--words-from``)."""
    def bits(value):
        return "-" if value is None else f"{value:.3f}"

    words = any("words_loss" in row for row in data["rows"])
    head = "| model | updates | masked-LM loss (bits) | unigram (bits) | masked |"
    lines = [head + (" at pseudo-words (bits) | masked at pseudo-words |" if words else ""),
             "| --- " * (5 + 2 * words) + "|"]
    for row in data["rows"]:
        line = (f"| {row['model']} | {row['updates']:,} | {bits(row['loss'])} | {bits(row.get('unigram_loss'))} | "
                f"{row['masked']:,} |")
        if words:
            line += f" {bits(row.get('words_loss'))} | {row.get('words_masked', 0):,} |"
        lines.append(line)
    return {"table": [f"## masked-LM loss under one fixed set of masks ({data['meta']['scored']})", *lines]}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="fairseq-maskplug-evaluate-mlm", description=__doc__,
                                     formatter_class=HelpFormatter)
    add_version(parser)
    parser.add_argument("checkpoints", nargs="+", help="masked-LM checkpoints (any of the package's MLM tasks)")
    parser.add_argument("--data", required=True,
                        help="binarized token data (a sentence_prediction root: its input0/)")
    parser.add_argument("--split", type=split_name, default="valid", help="split to score")
    parser.add_argument("--mask-prob", type=number("(0, 1]", float),
                        default=0.15, help="share of maskable tokens masked")
    parser.add_argument("--seed", type=number("[0, inf)", int), default=1, help="seed of the fixed masks")
    parser.add_argument("--unigram-from", metavar="CORPUS",
                        help="also score the same masked tokens by CORPUS's unigram frequencies (its train split, "
                             "add-one smoothed; a masked-LM folder with the scored data's dictionary): unigram_loss, "
                             "the plateau before a model uses context")
    parser.add_argument("--words-from", metavar="LEXICON_JSON",
                        help="also score apart the masked tokens inside the pseudo-words of this "
                             "fairseq-maskplug-rename-lexicon record (words_loss, words_masked): what a model learned "
                             "of words the general corpus never held")
    parser.add_argument("--output", help="write the JSON lines to this file (whole, once every checkpoint is "
                                         "scored) as well as printing them")
    add_user_dir(parser)
    return parser.parse_args(argv)


def score_checkpoints(args) -> int:
    """The command's work: one JSON line per checkpoint, each scored on the same fixed masks."""
    from ..data.layout import token_data_dir

    import_user_dir(args.user_dir)
    missing = [checkpoint for checkpoint in args.checkpoints if not os.path.exists(checkpoint)]
    if missing:  # before any scoring
        raise FileNotFoundError(f"checkpoint not found: {missing[0]}")
    unigram = None
    if args.unigram_from:
        import filecmp

        corpus = token_data_dir(args.unigram_from)
        scored = os.path.join(token_data_dir(args.data), "dict.txt")
        if not os.path.isfile(os.path.join(corpus, "dict.txt")) or \
                not filecmp.cmp(os.path.join(corpus, "dict.txt"), scored, shallow=False):
            raise ValueError(f"--unigram-from {args.unigram_from}: its dict.txt is not --data's ({scored}): the "
                             "frequencies must count the scored data's tokens")
        unigram = token_counts(corpus)
    words = None
    if args.words_from:
        from fairseq.data import Dictionary

        from ..data.renamed_lexicon import pseudo_words_of
        from ..data.word_boundaries import word_start_symbols

        dictionary = Dictionary.load(os.path.join(token_data_dir(args.data), "dict.txt"))
        try:
            with open(args.words_from, encoding="utf-8") as handle:
                record = json.load(handle)
            vocabulary = pseudo_words_of(record, dictionary)
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ValueError(f"--words-from {args.words_from}: {error}") from None
        words = (vocabulary, word_start_symbols(dictionary)[0], dictionary.nspecial)
    scorer = FixedMaskScorer(token_data_dir(args.data), args.split, args.mask_prob, args.seed, unigram=unigram,
                             words=words)
    lines = []
    for checkpoint in args.checkpoints:
        lines.append(json.dumps(scorer.score(checkpoint)))
        print(lines[-1], flush=True)
    if args.output:
        write_text(args.output, "\n".join(lines) + "\n")
    return 0


main = command_main(parse_args, score_checkpoints)


if __name__ == "__main__":
    sys.exit(main())

"""Print the first items of a split exactly as training builds them: see what a policy does.

Takes fairseq-train's arguments (DATA, --task, --mask-policy and its options, --seed,
--tokens-per-sample, ...) and prints, for items 0..n-1 of the split at the given epoch,
every input and target the task feeds the model, decoded. Items are built by the task's
own dataset with the same (seed, epoch, index) generator as in training, so what is shown
is what the model sees. In masked-LM targets ``_`` marks a position not predicted; for
``--task span_policy`` the target is the answer's first and last token position, shown with
the tokens it spans.

Example::

    fairseq-maskplug-show-examples work/bart/data/news --task guided_denoising \\
        --mask-policy salient_span --target-format masked -n 3 --post-process sentencepiece
"""

import argparse
import sys

from fairseq_maskplug.common.option_ranges import number

from . import HelpFormatter, configure_tool_output

FIELDS = (("source", ("net_input", "src_tokens")), ("target", ("target",)),
          ("mlm source", ("mlm", "src_tokens")), ("mlm target", ("mlm", "target")))


def own_parser():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter, add_help=False,
                                     usage="%(prog)s DATA --task TASK [fairseq-train options] [-n N] [--split S]")
    parser.add_argument("-h", "--help", action="store_true", help="show this help (fairseq-maskplug-train --task "
                                                                   "TASK --help lists the task's options)")
    parser.add_argument("-n", type=number("[1, inf)", int), default=5, help="items to show")
    parser.add_argument("--split", default="train", help="split to read")
    parser.add_argument("--epoch", type=number("[1, inf)", int),
                        default=1, help="training epoch whose masks are shown (from 1)")
    parser.add_argument("--post-process", default="none", choices=["none", "sentencepiece"],
                        help="sentencepiece: join pieces into words (▁ -> space)")
    return parser


def render(tokens, dictionary, post_process: str, blank_pad: bool) -> str:
    symbols = ["_" if blank_pad and t == dictionary.pad() else dictionary[t] for t in tokens.tolist()]
    if post_process == "sentencepiece":  # a piece starting with \u2581 starts a word; the others continue one
        special = {dictionary.bos_word, dictionary.eos_word, dictionary.pad_word, dictionary.unk_word, "<mask>", "_"}
        text = "".join(f" {s} " if s in special else s for s in symbols)  # <mask> etc. stand apart
        return " ".join(text.replace("\u2581", " ").split())
    return " ".join(symbols)


def field(sample, path):
    for key in path:
        if not isinstance(sample, dict) or key not in sample:
            return None
        sample = sample[key]
    return sample


def main(argv=None) -> int:
    configure_tool_output()
    parser = own_parser()
    own, rest = parser.parse_known_args(argv)
    if own.help or not rest:
        parser.print_help()
        return 0 if own.help else 2
    import fairseq_maskplug.plugin  # noqa: F401
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    from fairseq_maskplug.tasks.span_policy import SpanPolicyTask

    try:
        if not any(a == "--task" or a.startswith("--task=") for a in rest):
            raise ValueError("give the task and its data as fairseq-train takes them, e.g. "
                             "fairseq-maskplug-show-examples DATA --task guided_mlm --mask-policy span")
        if not any(a == "--arch" or a.startswith("--arch=") or a == "-a" for a in rest):
            rest = [*rest, "--arch", "roberta_tiny"]  # fairseq's parser needs one; items do not depend on it
        args = options.parse_args_and_arch(options.get_training_parser(), rest)
        task = tasks.setup_task(convert_namespace_to_omegaconf(args).task)
        task.load_dataset(own.split, epoch=own.epoch)
    except (ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    dataset = task.dataset(own.split)
    dataset.set_epoch(own.epoch)
    dictionary = task.source_dictionary
    answer_positions = isinstance(task, SpanPolicyTask)  # its target holds positions, not tokens
    for index in range(min(own.n, len(dataset))):
        sample = dataset.collater([dataset[index]])
        seq2seq = "prev_output_tokens" in sample["net_input"]  # text-to-text targets have no pad filler
        print(f"item {index} (epoch {own.epoch}, seed {args.seed})")
        for label, path in FIELDS:
            value = field(sample, path)
            if value is None:
                continue
            if value.dim() == 1:  # class labels
                print(f"  {label}: {value.tolist()}")
                continue
            if label == "target" and answer_positions:  # span_policy: [start, end] of the answer
                start, end = value[0].tolist()
                source = sample["net_input"]["src_tokens"][0]
                answer = render(source[start:end + 1], dictionary, own.post_process, False)
                print(f"  answer: tokens {start}..{end}: {answer}")
                continue
            blank = label.endswith("target") and not seq2seq
            for k, row in enumerate(value):
                name = label if len(value) == 1 else f"{label} (view {k + 1})"
                print(f"  {name}: {render(row, dictionary, own.post_process, blank)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

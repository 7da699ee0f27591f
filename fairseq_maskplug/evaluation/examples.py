"""The items of a split as training builds them, for ``fairseq-maskplug-show-examples`` (``preprocess/
show_examples.py`` parses its own options): decoded as text (:func:`render`) or as one HTML page whose masked
positions are coloured (:func:`html_page`)."""

import html
import sys

FIELDS = (("source", ("net_input", "src_tokens")), ("target", ("target",)),
          ("mlm source", ("mlm", "src_tokens")), ("mlm target", ("mlm", "target")))
#: background colours of the chosen positions, one per fully-explored view
VIEW_COLOURS = ("#ffd166", "#8ecae6", "#b5e48c", "#f4a3c0", "#cdb4db", "#ffb4a2", "#a8dadc", "#e9c46a")
#: the page: its head on one line, then the heading and the items
PAGE = ("<!doctype html><meta charset='utf-8'><title>{title}</title><style>body{{font-family:sans-serif}}"
        "p{{line-height:1.9}} span{{padding:1px 2px;border-radius:3px}} .k{{color:#666;font-size:90%}}</style>\n"
        "<h1>{title}</h1>\n{body}\n")


def html_symbols(tokens, dictionary, post_process: str):
    """Display text per position: sentencepiece pieces show their word start as a space."""
    symbols = [dictionary[t] for t in tokens.tolist()]
    if post_process == "sentencepiece":
        symbols = [s.replace("\u2581", " ") for s in symbols]
    return symbols


def html_masked_rows(source, target, dictionary, post_process: str) -> str:
    """Masked-LM rows (one per view) as one line of the original text, each view's chosen positions in
    its colour; the tooltip holds what the model saw there (``<mask>``, a random token or the original)."""
    pad = dictionary.pad()
    chosen = target.ne(pad)
    original = target.where(chosen, source)[0]
    shown = html_symbols(original, dictionary, post_process)
    seen = [html_symbols(row, dictionary, post_process) for row in source]
    parts = []
    for position, symbol in enumerate(shown):
        if original[position].item() == pad:
            continue
        views = [k for k in range(len(source)) if chosen[k, position]]
        text = html.escape(symbol)
        if views:
            k = views[0]
            tip = html.escape(f"view {k + 1}: input {seen[k][position]}" if len(source) > 1
                              else f"input {seen[k][position]}")
            text = f"<span style='background:{VIEW_COLOURS[k % len(VIEW_COLOURS)]}' title='{tip}'>{text}</span>"
        parts.append(text)
    return ("" if post_process == "sentencepiece" else " ").join(parts)


def html_token_row(row, dictionary, post_process: str, mask_idx) -> str:
    """A text-to-text row, ``<mask>`` coloured."""
    parts = []
    for token, symbol in zip(row.tolist(), html_symbols(row, dictionary, post_process)):
        if token == dictionary.pad():
            continue
        text = html.escape(symbol)
        parts.append(f"<span style='background:{VIEW_COLOURS[0]}'>{text}</span>" if token == mask_idx else text)
    return ("" if post_process == "sentencepiece" else " ").join(parts)


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


def show(own, rest) -> int:
    """The command's work: ``rest`` (fairseq-train's arguments) parsed by fairseq, the task's dataset built, and
    its first ``own.n`` items printed as text or as one HTML page (``own``: the command's own options); returns
    the exit status (an error is one line and 2)."""
    from .. import plugin  # noqa: F401  (the tasks and policies registered)
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    from ..tasks.span_policy import SpanPolicyTask
    from ..tasks.token_heads import TokenHeadTask

    try:
        if not any(a == "--task" or a.startswith("--task=") for a in rest):
            raise ValueError("give the task and its data as fairseq-train takes them, e.g. "
                             "fairseq-maskplug-show-examples DATA --task guided_mlm --mask-policy span")
        if not any(a == "--arch" or a.startswith("--arch=") or a == "-a" for a in rest):
            rest = [*rest, "--arch", "roberta_tiny"]  # fairseq's parser needs one; items do not depend on it
        args = options.parse_args_and_arch(options.get_training_parser(), rest)
        task = tasks.setup_task(convert_namespace_to_omegaconf(args).task)
        if own.format == "html" and isinstance(task, TokenHeadTask):  # labels or answer positions, no masks
            raise ValueError(f"--format html colours masked positions; --task {args.task} trains a token head on "
                             "unmasked text: use the text format")
        if own.task_state:
            load_task_state(task, own.task_state)
        task.load_dataset(own.split, epoch=own.epoch)
        dataset = task.dataset(own.split)
        dataset.set_epoch(own.epoch)
    except (ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    dictionary = task.source_dictionary
    answer_positions = isinstance(task, SpanPolicyTask)  # its target holds positions, not tokens
    if own.format == "html":
        print(html_page(task, dataset, own, args.seed))
        return 0
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


def load_task_state(task, checkpoint: str) -> None:
    """The task state saved in ``checkpoint`` (its weights are memory-mapped where the format allows, not read)."""
    import os

    from ..common.checkpoint_files import load_state

    if not os.path.isfile(checkpoint):
        raise FileNotFoundError(f"--task-state {checkpoint}: no such file")
    task.load_state_dict(load_state(checkpoint).get("task_state") or {})


def html_page(task, dataset, own, seed) -> str:
    """The items as one HTML page (``--format html``)."""
    dictionary = task.source_dictionary
    mask_idx = dictionary.index("<mask>")
    body = []
    for index in range(min(own.n, len(dataset))):
        sample = dataset.collater([dataset[index]])
        seq2seq = "prev_output_tokens" in sample["net_input"]
        body.append(f"<p><span class='k'>item {index} (epoch {own.epoch}, seed {seed})</span><br>")
        for prefix, (_, source_path), (_, target_path) in (("", *FIELDS[:2]), ("mlm ", *FIELDS[2:])):
            source, target = field(sample, source_path), field(sample, target_path)
            if source is None or target is None or target.dim() == 1:  # class labels
                continue
            if seq2seq:
                rows = [html_token_row(row[0], dictionary, own.post_process, mask_idx) for row in (source, target)]
                body.append(f"<span class='k'>source</span> {rows[0]}<br><span class='k'>target</span> {rows[1]}<br>")
            else:
                body.append(f"<span class='k'>{prefix}masked</span> "
                            f"{html_masked_rows(source, target, dictionary, own.post_process)}<br>")
        body.append("</p>")
    return PAGE.format(title=html.escape(page_title(task.cfg, own.split)), body="\n".join(body))


def page_title(cfg, split: str) -> str:
    """What the page shows: the task, its policy and the options that change what a policy's masks look like
    (a word unit, a denoising target), and the split, e.g. ``guided_mlm: random, --mask-unit word, split valid``."""
    what = [f"{cfg._name}: {getattr(cfg, 'mask_policy', '') or 'its own masks'}"]
    if getattr(cfg, "mask_unit", "token") != "token":
        what.append(f"--mask-unit {cfg.mask_unit}")
    if getattr(cfg, "target_format", None):
        what.append(f"--target-format {cfg.target_format}")
    return ", ".join([*what, f"split {split}"])

"""Every registered mask policy as a Hugging Face ``transformers.Trainer`` data collator: :class:`PolicyCollator` for
masked-LM models (``guided_mlm``, and ``fe_mlm``'s views), :class:`DenoisingCollator` for encoder-decoders
(``guided_denoising``'s text-to-text pairs).

    from fairseq_maskplug.hf import PolicyCollator, PolicyTrainer, track_column
    collator = PolicyCollator(tokenizer, "selective", {"selective_cap": 0.15}, seed=1)
    PolicyTrainer(model=..., data_collator=collator, train_dataset=rows, ...)  # rows: input_ids, importance, idx

Each example is a mapping with ``input_ids`` (a tokenized line, ``<s> ... </s>``), one column per
side-information track the policy reads (``policy.side_info_names``: a value per token, e.g. from
:func:`track_column`), and optionally ``idx``, its row in the split. An item is drawn as
``fairseq-train --task guided_mlm`` draws one (:class:`~fairseq_maskplug.data.policy_path.PolicyPath`): a
generator per row, the policy's positions, then the run's corruption of them (80% ``<mask>``, 10% a random
token, 10% kept: ``leave_unmasked_prob``, ``random_token_prob``, as fairseq's ``masked_lm``; the random token
drawn from every id that is not a special token, as fairseq's dictionary after its four specials). The batch
holds ``input_ids``, ``attention_mask`` and ``labels`` (the original id where chosen, -100 elsewhere: the
positions ``transformers``' losses skip), padded to the longest row.

**Which generator.** ``draws="fresh"`` (the default, as transformers' ``DataCollatorForLanguageModeling`` draws
new masks at every call): the rows of a call draw in turn from one generator,
``numpy.random.default_rng((seed, epoch, call, worker, rank))``, ``call`` counting this collator's batches in its
process, ``worker`` the DataLoader worker's seed (torch gives each worker of each epoch its own, from the loader's
generator; 0 in the training process), ``rank`` the data-parallel rank. A run's masks are fixed by the seed and
the loader's order, and no two calls, workers or processes repeat a stream, with or without an ``idx`` column.
``draws="epoch"``: ``numpy.random.default_rng((seed, epoch, idx))``, fairseq's:
the same seed, epoch, row, tokens and side information give the same chosen positions and corrupted input as
the fairseq path (tested for every policy that needs no training feedback), and a row keeps its masks until the
epoch changes (:class:`EpochCallback` given to the Trainer, or :meth:`PolicyCollator.set_epoch`; fairseq's first
epoch is 1). Without an ``idx`` column the collator numbers examples in the order its process sees them
(a warning says so).

**Trainer's columns.** Under transformers' default ``remove_unused_columns=True`` the Trainer drops every
column its model does not take, the tracks and ``idx`` too: :func:`PolicyTrainer` keeps the collator's columns
(with a plain ``Trainer``, give ``remove_unused_columns=False``).

``views=K`` gives every example its K fully-explored views (``--task fe_mlm``) as K adjacent rows.
``mask_unit="word"`` chooses and corrupts whole words (``--mask-unit word``), a word starting at a token that
begins with the tokenizer's word mark (``▁`` sentencepiece, ``Ġ`` GPT-2).

A policy that learns from training (``ptw``) draws with statistics the collator keeps: train it with
:func:`PolicyTrainer` (``transformers.Trainer`` whose ``compute_loss`` hands each training batch's loss per
predicted position back to the collator, summed over data-parallel processes, as ``fairseq-train`` folds
it; the batch carries the positions' groups as ``feedback_groups``, which the trainer takes out before the
model sees the batch). The collator must run in the training process (``dataloader_num_workers=0``; the
trainer refuses more), and since the loader prepares a batch ahead, a batch draws with the statistics
folded up to two batches before it. The statistics live in the collator for the run (not in the Trainer's
checkpoints).
"""

from typing import Iterable, List, Mapping, Optional, Sequence

import numpy as np
import torch

from .common.fairseq_import import import_fairseq_keeping_logging

import_fairseq_keeping_logging()  # before the modules below import fairseq

from .data.policy_path import MLMFormat, PolicyChooser, PolicyPath  # noqa: E402
from .masking import Corruption  # noqa: E402
from .masking.registry import build_mask_policy, check_option_names  # noqa: E402
from .tasks.training_feedback import DROPPED_KEY, SUMS_KEY, TrainingFeedback  # noqa: E402

#: the label ``transformers``' cross entropy ignores
IGNORE_INDEX = -100
#: how a collator seeds a row's generator (the module's "Which generator")
DRAWS = ("fresh", "epoch")


def loader_stream() -> tuple:
    """``(worker seed, worker id, rank)`` of the calling process: the DataLoader worker's seed and id (0, 0 in the
    process that trains) and the data-parallel rank (0 without ``torch.distributed``)."""
    info = torch.utils.data.get_worker_info()
    distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
    return (0 if info is None else int(info.seed), 0 if info is None else int(info.id),
            torch.distributed.get_rank() if distributed else 0)


def unmaskable_ids(tokenizer) -> list:
    """Ids a policy never chooses: every special token of the tokenizer (``all_special_ids``: a BERT-style
    tokenizer's ``[CLS]`` and ``[SEP]`` too, as transformers' own MLM collator), and its bos, eos and pad (fairseq's
    masked-LM tasks never choose ``<s>``, ``</s>``, ``<pad>``); ``<unk>`` stays choosable, as in fairseq's tasks."""
    special = set(tokenizer.all_special_ids) | {tokenizer.bos_token_id, tokenizer.eos_token_id,
                                                tokenizer.pad_token_id}
    return sorted(i for i in special - {None, tokenizer.unk_token_id} if i is not None)


def replacement_ids(tokenizer) -> np.ndarray:
    """Ids a random replacement may draw: every id but the special tokens (fairseq: ids after its four
    specials, ``<mask>`` excluded; the same set for a tokenizer this project exported)."""
    special = set(tokenizer.all_special_ids)
    return np.array([i for i in range(len(tokenizer)) if i not in special], dtype=np.int64)


def word_mark(tokens: Sequence[Optional[str]]) -> str:
    """The word mark more of ``tokens`` begin with: sentencepiece's ``▁`` (also on a tie) or GPT-2's ``Ġ``."""
    from .data.word_boundaries import GPT2_SPACE, SPM_SPACE

    return SPM_SPACE if sum(t.startswith(SPM_SPACE) for t in tokens if t) >= sum(
        t.startswith(GPT2_SPACE) for t in tokens if t) else GPT2_SPACE


def word_start_ids(tokenizer) -> np.ndarray:
    """Per id, True where the token starts a word (specials and ``<unk>`` count as starts), as
    :func:`~fairseq_maskplug.data.word_boundaries.word_start_symbols` reads a fairseq dictionary."""
    from .data.word_boundaries import _markup

    tokens = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    mark = word_mark(tokens)
    special = set(tokenizer.all_special_ids)
    return np.array([i in special or t is None or _markup(t) or t.startswith(mark) for i, t in enumerate(tokens)])


class PolicyCollator:
    """``collator(examples) -> {"input_ids", "attention_mask", "labels"}`` masking with a registered policy.

    Args:
        tokenizer: the model's tokenizer (its ``<mask>``, pad and special ids, and its vocabulary).
        policy: a registered mask policy's name (``random``, ``span``, ``selective``, ``pmi``, ``l3``, ...).
        options: the policy's options, as a dict of its option names (``{"selective_cap": 0.15}``) or an
            instance of its options dataclass; unset ones keep their defaults.
        seed: fairseq's ``--seed``.
        leave_unmasked_prob, random_token_prob: the corruption of chosen positions (fairseq's defaults 0.1, 0.1).
        mask_unit: ``"token"`` or ``"word"`` (``--mask-unit``).
        index_column: the example's row in its split (seeds its draw); missing: numbered as seen.
        views: ``K`` fully-explored views of every example (``--task fe_mlm --fe-views K``, Zheng et al.): the
            batch holds its K disjoint views as K adjacent rows, as fairseq's; None: one mask per example.
        mlm_probability: transformers' name for the policy's rate (``random``'s ``mask_prob``, ``span``'s
            ``span_mask_prob``, ...); None: the options' own.
        draws: ``"fresh"`` new masks at every call (transformers' habit), ``"epoch"`` fairseq's draw, a row's masks
            fixed until the epoch changes (the module's "Which generator").

    An option the policy does not read (a misspelt one, another policy's) is refused, naming the policy's options.
    """

    #: whether the tokenizer must have ``<mask>`` (not for T5's span corruption, whose sentinels replace it)
    requires_mask_token = True

    def __init__(self, tokenizer, policy: str = "random", options=None, seed: int = 1,
                 leave_unmasked_prob: float = 0.1, random_token_prob: float = 0.1, mask_unit: str = "token",
                 index_column: str = "idx", views: Optional[int] = None, mlm_probability: Optional[float] = None,
                 draws: str = "fresh"):
        if draws not in DRAWS:
            raise ValueError(f"draws must be one of {', '.join(map(repr, DRAWS))}, got {draws!r}")
        if (tokenizer.mask_token_id is None and self.requires_mask_token) or tokenizer.pad_token_id is None:
            raise ValueError("the tokenizer has no mask or pad token: a masked-LM collator needs both")
        if mask_unit not in ("token", "word"):
            raise ValueError(f"mask_unit must be 'token' or 'word', got {mask_unit!r}")
        if isinstance(options, Mapping):
            check_option_names(policy, options)
        built = build_mask_policy(policy, options, rate=mlm_probability)
        #: what a policy that learns from training wants from it (None: nothing), and its statistics
        #: (the task side's TrainingFeedback: the same sums, non-finite losses left out, the same fold)
        self.feedback = built.feedback
        self.training_feedback = None if self.feedback is None else TrainingFeedback(self.feedback, policy)
        from .masking.words import with_words
        built = with_words(built, mask_unit, lambda: word_start_ids(tokenizer))
        if views is not None:
            if isinstance(views, bool) or not isinstance(views, int) or views < 1:
                raise ValueError(f"views must be a whole number >= 1 (fe_mlm's K), got {views!r}")
            from .tasks.fe_mlm import checked_views_policy
            checked_views_policy(built, policy, views)
        self.policy, self.tokenizer, self.index_column = built, tokenizer, index_column
        self.pad = tokenizer.pad_token_id
        corruption = Corruption(tokenizer.mask_token_id, replacement_ids(tokenizer), None, leave_unmasked_prob,
                                random_token_prob)
        special = unmaskable_ids(tokenizer)
        self.path = PolicyPath(PolicyChooser(built, views), MLMFormat(corruption, self.pad), special, seed)
        self.epoch, self.draws, self._seen, self._calls = 1, draws, 0, 0

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next draws belong to (fairseq counts from 1)."""
        if epoch < 1:
            raise ValueError(f"epoch must be >= 1 (fairseq's first epoch is 1), got {epoch}")
        self.epoch = int(epoch)

    @property
    def tracks(self) -> Sequence[str]:
        """The side-information columns each example must carry."""
        return tuple(self.policy.side_info_names)

    @property
    def columns(self) -> Sequence[str]:
        """Every column the collator reads besides ``input_ids``: the tracks and the row index."""
        return (*self.tracks, self.index_column)

    def call_generator(self, stream: tuple) -> Optional[np.random.Generator]:
        """The generator every row of the next call draws from, one after another, for fresh draws:
        ``(seed, epoch, call, worker seed, rank)`` (``stream``: :func:`loader_stream`); None for ``draws="epoch"``,
        whose rows draw from generators of their own."""
        if self.draws == "epoch":
            return None
        worker_seed, _, rank = stream
        return np.random.default_rng((self.path.seed, self.epoch, self._calls, worker_seed, rank))

    def row_number(self, example: Mapping, stream: tuple) -> tuple:
        """``(row, epoch key)``: the example's ``idx`` (else the next number this process gives a row) and what
        seeds its own generator under ``draws="epoch"``: ``(seed, epoch, idx)``, fairseq's, or without ``idx``
        ``(seed, epoch, number, worker id, rank)``, so that workers and processes numbering rows alike differ."""
        index = example.get(self.index_column)
        if index is not None:
            return int(index), (self.path.seed, self.epoch, int(index))
        if not self._seen:
            import warnings
            warnings.warn(f"the examples have no {self.index_column!r} column: rows are numbered as this collator "
                          "sees them (PolicyTrainer, or transformers' Trainer with remove_unused_columns=False, keeps "
                          "the column)", stacklevel=4)
        index, self._seen = self._seen, self._seen + 1
        _, worker, rank = stream
        return index, (self.path.seed, self.epoch, index, worker, rank)

    def feedback_chooser(self):
        """The chooser drawing with the collator's current statistics (None: a policy that learns nothing), made
        once per call: the statistics change only between calls, when a training step folds its losses."""
        return None if self.feedback is None else self.path.chooser.with_state(self.state)

    def draw(self, example: Mapping, counts: bool = True, rng: Optional[np.random.Generator] = None,
             stream: Optional[tuple] = None, chooser=None) -> dict:
        """One example's item: ``{"source", "target", "mask_counts"}`` (without ``counts``, no ``mask_counts``: the
        same draw). With ``draws="epoch"`` the fairseq path's item; fresh draws take ``rng``, the call's generator
        (given none, the one the next call starts with: the item the next call gives this example as its first
        row). ``stream``: :func:`loader_stream`, ``chooser``: :meth:`feedback_chooser`, each read once per call."""
        tokens = np.asarray(example["input_ids"], dtype=np.int64)
        if tokens.size == 0:
            raise ValueError(f"row {example.get(self.index_column, '(unnumbered)')} has no tokens: nothing to mask or "
                             "denoise (fairseq skips empty lines); drop empty rows first, e.g. "
                             "dataset.filter(lambda row: len(row['input_ids']) > 0)")
        side = {}
        for name in self.tracks:
            if name not in example:
                raise KeyError(f"mask policy needs the column {name!r} (a value per token; track_column() reads a "
                               f"binarized track); the example has {sorted(example)}: with transformers' Trainer, "
                               "TrainingArguments(remove_unused_columns=False) keeps the columns the model does not "
                               "take (PolicyTrainer keeps them)")
            side[name] = np.asarray(example[name])
            if side[name].shape != tokens.shape:
                raise ValueError(f"column {name!r} has {side[name].shape[0]} values for {tokens.shape[0]} tokens")
        stream = stream or loader_stream()
        index, key = self.row_number(example, stream)
        if self.draws == "epoch":
            rng = np.random.default_rng(key)
        elif rng is None:
            rng = self.call_generator(stream)
        chooser = chooser or self.feedback_chooser()
        return self.path.draw(tokens, side, rng, index, chooser, counts=counts)

    def drawn(self, examples: Iterable[Mapping]) -> list:
        """The call's items (:meth:`draw` of each example, fresh draws from one generator in turn), then the call
        counted (fresh draws move on)."""
        stream, chooser = loader_stream(), self.feedback_chooser()
        rng = self.call_generator(stream)
        items = [self.draw(example, counts=False, rng=rng, stream=stream, chooser=chooser) for example in examples]
        self._calls += 1
        return items

    def __call__(self, examples: Iterable[Mapping]) -> dict:
        items = self.drawn(examples)
        # K adjacent rows per example with views; rows filled in numpy, one tensor per column at the end
        input_ids = _padded([row for item in items for row in np.atleast_2d(item["source"].numpy())], self.pad)
        targets = _padded([row for item in items for row in np.atleast_2d(item["target"].numpy())], self.pad)
        labels = np.where(targets != self.pad, targets, IGNORE_INDEX)
        batch = {"input_ids": torch.from_numpy(input_ids), "attention_mask": torch.from_numpy(
            (input_ids != self.pad).astype(np.int64)), "labels": torch.from_numpy(labels)}
        if self.feedback is not None:  # each position's group, for PolicyTrainer (-1: padding; no views here)
            batch["feedback_groups"] = torch.from_numpy(_padded([item["feedback_groups"].numpy() for item in items], -1))
        return batch

    @property
    def state(self) -> Optional[np.ndarray]:
        """The statistics the next draw uses (None for a policy that does not learn from training)."""
        return None if self.training_feedback is None else self.training_feedback.running

    @state.setter
    def state(self, value) -> None:
        self.training_feedback.running = np.asarray(value, dtype=np.float64)

    def fold(self, groups: torch.Tensor, losses: torch.Tensor) -> None:
        """Fold one training batch in: ``groups`` and ``losses`` of its predicted positions, summed over the
        data-parallel processes first (every process calls this once per forward, as ``fairseq-train`` folds each
        micro-batch: one function, :meth:`.TrainingFeedback.fold_update`), non-finite losses left out."""
        if self.training_feedback is None:
            raise ValueError("this collator's policy does not learn from training")
        statistics = self.training_feedback.batch_statistics(groups.cpu(), losses.detach())
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            device = "cuda" if torch.distributed.get_backend() == "nccl" else "cpu"
            for key in (SUMS_KEY, DROPPED_KEY):
                summed = torch.as_tensor(statistics[key], dtype=torch.float64).to(device)
                torch.distributed.all_reduce(summed)
                statistics[key] = summed.cpu()
        self.training_feedback.fold_update([statistics])


class DenoisingCollator(PolicyCollator):
    """``collator(examples) -> {"input_ids", "attention_mask", "labels", "decoder_input_ids"}``: text-to-text pairs
    as ``fairseq-train --task guided_denoising`` builds them (Ye, Li et al. 2021; :mod:`~fairseq_maskplug.masking.
    seq2seq`), for ``BartForConditionalGeneration`` and other encoder-decoder models.

    The same draw as :class:`PolicyCollator` (generator of (seed, epoch, row), the policy's positions), made into a
    pair by the task's format: ``target_format`` ``full`` (+Orig: the original line), ``masked`` (+Rand, +SSM: the
    chosen runs separated by ``<mask>``, then ``</s>``; guided_denoising's default) or ``t5`` (span corruption: the
    tokenizer's ``<extra_id_0>`` ... ``<extra_id_{sentinels-1}>`` as sentinels). ``collapse``: ``on`` one
    ``<mask>`` per run, ``off`` one per token, ``auto`` on for span policies (``--collapse-spans``). Every chosen
    token becomes ``<mask>`` unless ``leave_unmasked_prob``/``random_token_prob`` are set (the task's defaults: 0,
    the paper's examples). ``labels`` is the target, -100 where padded; ``decoder_input_ids`` is fairseq's
    ``prev_output_tokens`` (``</s>`` then the target without its last token, padded), which is what BART's
    ``decoder_start_token_id`` (``</s>``) makes from the labels; pass ``decoder_input_ids=False`` to let a model
    shift the labels with its own start token (T5: the pad). ``draws`` as :class:`PolicyCollator`'s. A line that
    does not end with ``</s>`` gets one (a 0
    in every column), as the task frames a block. For ``t5`` the tokenizer needs no ``<mask>`` (T5's have none).
    """

    def __init__(self, tokenizer, policy: str = "random", options=None, seed: int = 1, target_format: str = "masked",
                 collapse: str = "auto", leave_unmasked_prob: float = 0.0, random_token_prob: float = 0.0,
                 sentinels: int = 100, index_column: str = "idx", decoder_input_ids: bool = True,
                 draws: str = "fresh"):
        from .masking.seq2seq import TARGET_FORMATS
        from .data.policy_path import Seq2SeqFormat

        if target_format not in TARGET_FORMATS:
            raise ValueError(f"target_format must be one of {', '.join(TARGET_FORMATS)}, got {target_format!r}")
        if collapse not in ("auto", "on", "off"):
            raise ValueError(f"collapse must be 'auto', 'on' or 'off', got {collapse!r}")
        if tokenizer.eos_token_id is None:
            raise ValueError("the tokenizer has no </s> (eos) token: a text-to-text target ends with one")
        self.requires_mask_token = target_format != "t5"  # T5's tokenizers have sentinels and no <mask>
        super().__init__(tokenizer, policy, options, seed, leave_unmasked_prob, random_token_prob, "token",
                         index_column, draws=draws)
        if self.feedback is not None:
            raise ValueError(f"mask policy {policy!r} learns from training: PolicyCollator with PolicyTrainer "
                             "trains it; no text-to-text collator folds its losses")
        corrupting = leave_unmasked_prob > 0 or random_token_prob > 0
        ids = ()
        if target_format == "t5":
            if collapse == "off":
                raise ValueError("target_format 't5' replaces each run by one sentinel: collapse 'off' contradicts it")
            if corrupting:
                raise ValueError("target_format 't5' replaces every chosen token by its run's sentinel (no 80/10/10): "
                                 "give leave_unmasked_prob=0 and random_token_prob=0")
            ids = t5_sentinel_ids(tokenizer, sentinels)
        self.eos, self.decoder_input_ids = tokenizer.eos_token_id, decoder_input_ids
        collapsing = collapse == "on" or (collapse == "auto" and self.policy.chooses_spans)
        output = Seq2SeqFormat(target_format, collapsing, self.path.output_format.corruption if corrupting else None,
                               tokenizer.mask_token_id, self.eos, ids)
        self.path = PolicyPath(self.path.chooser, output, self.path.special_ids, seed)

    def draw(self, example: Mapping, counts: bool = True, rng: Optional[np.random.Generator] = None,
             stream: Optional[tuple] = None, chooser=None) -> dict:
        """One example's ``{"source", "target", "mask_counts"}`` as guided_denoising's item (``</s>`` appended
        where the line lacks one); the arguments as :meth:`PolicyCollator.draw`'s."""
        if len(example["input_ids"]) and example["input_ids"][-1] != self.eos:
            example = {**example, "input_ids": list(example["input_ids"]) + [self.eos],
                       **{name: np.append(np.asarray(example[name]), 0) for name in self.tracks if name in example}}
        return super().draw(example, counts, rng, stream, chooser)

    def __call__(self, examples: Iterable[Mapping]) -> dict:
        from .masking.seq2seq import previous_output_tokens

        items = self.drawn(examples)
        sources = [item["source"].numpy() for item in items]
        targets = [item["target"].numpy() for item in items]
        batch = {"input_ids": torch.from_numpy(_padded(sources, self.pad))}
        batch["attention_mask"] = batch["input_ids"].ne(self.pad).long()
        batch["labels"] = torch.from_numpy(_padded(targets, IGNORE_INDEX))
        if self.decoder_input_ids:
            batch["decoder_input_ids"] = torch.from_numpy(
                _padded([previous_output_tokens(t, self.eos) for t in targets], self.pad))
        return batch


def _padded(rows: Sequence[np.ndarray], fill: int) -> np.ndarray:
    """The rows as one int64 array, right-padded with ``fill`` to the longest (both collators' batches)."""
    out = np.full((len(rows), max(len(row) for row in rows)), fill, dtype=np.int64)
    for i, row in enumerate(rows):
        out[i, :len(row)] = row
    return out


def t5_sentinel_ids(tokenizer, count: int) -> List[int]:
    """The ids of ``<extra_id_0>`` ... ``<extra_id_{count-1}>`` in ``tokenizer`` (T5's sentinels), refused in one
    line where one is missing (a tokenizer without them: ``tokenizer.add_tokens([...], special_tokens=True)``)."""
    if count < 2:
        raise ValueError(f"sentinels must be at least 2 (one run and the closing sentinel), got {count}")
    vocabulary = tokenizer.get_vocab()
    missing = [f"<extra_id_{k}>" for k in range(count) if f"<extra_id_{k}>" not in vocabulary]
    if missing:
        raise ValueError(f"target_format 't5' needs the tokenizer's sentinels <extra_id_0> ... <extra_id_{count - 1}>; "
                         f"{missing[0]} is not in its vocabulary ({len(missing)} missing)")
    return [vocabulary[f"<extra_id_{k}>"] for k in range(count)]


def check_vocabulary(tokenizer, dictionary_path: str) -> None:
    """Refuse, in one line, a tokenizer whose vocabulary is not the track's dictionary (``dict.txt`` beside the
    split, with ``<mask>`` after its last row as the masked-LM tasks add it): the same number of ids, and for
    sentencepiece data (pieces in ``dict.txt``) the same piece at every id; a track aligned to other pieces would
    mask other tokens than it scored. GPT-2 BPE data (``dict.txt`` holds GPT-2 label ids) is checked by size."""
    from fairseq.data import Dictionary

    dictionary = Dictionary.load(dictionary_path)
    dictionary.add_symbol("<mask>")
    size = len(tokenizer)
    if size != len(dictionary):
        raise ValueError(f"the tokenizer has {size} ids, the track's dictionary {dictionary_path} {len(dictionary)} "
                         "with <mask>: the track belongs to other data (or give the tokenizer its export wrote)")
    symbols = dictionary.symbols[dictionary.nspecial:-1]
    if symbols and all(s.isdigit() or s.startswith("madeupword") for s in symbols):
        return  # GPT-2 BPE labels: the tokenizer's byte-level pieces are not dict.txt's rows
    tokens = tokenizer.convert_ids_to_tokens(list(range(size)))
    for i, (ours, theirs) in enumerate(zip(dictionary.symbols, tokens)):
        if ours != theirs:
            raise ValueError(f"the tokenizer's id {i} is {theirs!r}, the track's dictionary {dictionary_path} has "
                             f"{ours!r} there: the track is aligned to other pieces (give the tokenizer the export of "
                             "this data wrote)")


def track_column(split_prefix: str, name: str, tokens_prefix: Optional[str] = None, *, tokenizer) -> List[np.ndarray]:
    """A binarized side-information track as a dataset column: per line of ``split_prefix`` (e.g.
    ``data/indomain/train``), its values with a 0 first for the ``<s>`` the tokenizer adds (fairseq's
    masked-LM blocking gives ``<s>`` the value 0), so row ``i`` lines up with the tokenizer's ids of line
    ``i`` (``<s> pieces </s>``). The track is checked against the split as training checks it, and
    ``tokenizer`` (the one whose ids the examples hold) against the split's dictionary
    (:func:`check_vocabulary`) before any row."""
    import os

    from fairseq.data import data_utils

    from .data.side_info import load_side_info

    check_vocabulary(tokenizer, os.path.join(os.path.dirname(tokens_prefix or split_prefix) or ".", "dict.txt"))
    tokens = data_utils.load_indexed_dataset(tokens_prefix or split_prefix, None)
    if tokens is None:
        raise FileNotFoundError(f"{tokens_prefix or split_prefix}.bin/.idx: no binarized split there")
    side = load_side_info(split_prefix, name, tokens, split=split_prefix)
    return [np.concatenate([np.zeros(1, dtype=row.dtype), row]) for row in (side[i].numpy() for i in range(len(side)))]


def PolicyTrainer(*args, **kwargs):
    """A ``transformers.Trainer`` (same arguments) for a :class:`PolicyCollator`:

    - it keeps the collator's columns (:attr:`PolicyCollator.columns`: the tracks and ``idx``) under
      ``remove_unused_columns=True``, the Trainer's default, which drops every column the model's ``forward``
      does not take (the collator reads them; the model sees only the batch it makes);
    - for a policy that learns from training, in each training step it takes the batch's ``feedback_groups`` out,
      computes the loss as ``Trainer`` does, and folds the cross entropy of every predicted position, by group,
      into the collator's statistics (:meth:`PolicyCollator.fold`).
    """
    import torch.nn.functional as F

    from .interop import import_transformers
    transformers = import_transformers()

    class _PolicyTrainer(transformers.Trainer):
        def _set_signature_columns_if_needed(self):
            super()._set_signature_columns_if_needed()
            kept = getattr(self.data_collator, "columns", ())
            self._signature_columns += [name for name in kept if name not in self._signature_columns]

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            groups = inputs.pop("feedback_groups", None)
            loss, outputs = super().compute_loss(model, inputs, return_outputs=True,
                                                 num_items_in_batch=num_items_in_batch)
            if groups is not None and model.training:
                labels = inputs["labels"]
                chosen = labels.ne(IGNORE_INDEX)
                token_losses = F.cross_entropy(outputs.logits[chosen].float(), labels[chosen], reduction="none")
                self.data_collator.fold(groups[chosen], token_losses)
            return (loss, outputs) if return_outputs else loss

    trainer = _PolicyTrainer(*args, **kwargs)
    collator = trainer.data_collator
    if getattr(collator, "feedback", None) is not None and trainer.args.dataloader_num_workers > 0:
        raise ValueError(f"dataloader_num_workers {trainer.args.dataloader_num_workers}: the collator of a policy "
                         "that learns from training must draw in the training process (give 0)")
    return trainer


#: the name :func:`PolicyTrainer` had when it only folded training feedback
FeedbackTrainer = PolicyTrainer


def EpochCallback(collator: PolicyCollator):
    """A ``transformers.TrainerCallback`` that tells ``collator`` each epoch (1, 2, ...) as the Trainer begins it: what
    ``draws="epoch"`` (fairseq's draws) needs to give each epoch new masks; fresh draws move on without it."""
    from .interop import import_transformers
    transformers = import_transformers()

    class _EpochCallback(transformers.TrainerCallback):
        def on_epoch_begin(self, args, state, control, **kwargs):
            collator.set_epoch(int(state.epoch or 0) + 1)

    return _EpochCallback()

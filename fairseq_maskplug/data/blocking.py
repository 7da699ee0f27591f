"""Load a split and block it for MLM; side information goes through the very same steps."""

import os
from typing import Dict, Mapping, Sequence, Tuple, Union

import numpy as np
from fairseq import utils
from fairseq.data import PrependTokenDataset, TokenBlockDataset, data_utils
from fairseq.data.indexed_dataset import best_fitting_int_dtype
from fairseq.data.shorten_dataset import maybe_shorten_dataset

from ..masking.values import FINITE, ValueRule
from .dictionaries import check_token_ids
from .side_info import load_side_info


class TokenBlocks(TokenBlockDataset):
    """fairseq's ``TokenBlockDataset`` with a working ``break_mode="eos"`` under numpy 2.

    fairseq builds the eos index with ``np.compat.long``, which numpy 2 removed; every
    other mode is fairseq's own code. In eos mode each line is one block.
    """

    @staticmethod
    def _build_slice_indices(sizes, break_mode, document_sep_len, block_size):
        if break_mode != "eos":
            return TokenBlockDataset._build_slice_indices(sizes, break_mode, document_sep_len, block_size)
        from fairseq.data.token_block_utils_fast import _get_slice_indices_fast

        sizes = np.asarray(sizes, dtype=np.int64)
        block_size = block_size or 0
        slice_indices = _get_slice_indices_fast(sizes, "eos", block_size, document_sep_len)
        lines = np.arange(len(sizes))
        block_to_dataset_index = np.stack([lines, np.zeros_like(lines), lines], 1)
        index_dtype = best_fitting_int_dtype(slice_indices[-1].max())
        return ((slice_indices[:, 1] - slice_indices[:, 0]).astype(np.uint16 if block_size < 65535 else np.uint32),
                block_to_dataset_index.astype(index_dtype), slice_indices.astype(index_dtype))


def load_blocked_split(cfg, split: str, dictionary, side_info_names: Union[Sequence[str], Mapping[str, ValueRule]] = (),
                       epoch: int = 1, combine: bool = False, framing: int = 1) -> Tuple[object, Dict[str, object]]:
    """Return ``(tokens, {name: side_info})``, both shortened, blocked and prefixed alike.

    ``side_info_names`` names the tracks, or maps each to the :class:`ValueRule` its values
    must follow (default: finite); ``cfg.side_info_without_fingerprint`` (if present)
    accepts tracks without their fingerprint file, ``cfg.verify_data`` compares each track's SHA-256. ``framing`` positions of every
    ``tokens_per_sample`` are kept for framing tokens: 1 for the ``<s>`` prepended here
    (masked LM), 2 where the task also appends a ``</s>`` (BART).

    The pipeline is fairseq ``masked_lm``'s: ``load_indexed_dataset`` ->
    ``maybe_shorten_dataset`` -> ``TokenBlockDataset(tokens_per_sample - framing)`` (see
    :class:`TokenBlocks`) ->
    ``PrependTokenDataset(<s>)``. Side information is verified line by line against the
    token data and then passed through the same function with the same ``cfg``, so a
    block of side information always covers exactly the tokens of its block (its
    ``<s>`` position gets the value 0).
    """
    if framing not in (1, 2):
        raise ValueError(f"framing must be 1 (<s>) or 2 (<s> and </s>), got {framing}")
    paths = utils.split_paths(cfg.data)
    split_prefix = os.path.join(paths[(epoch - 1) % len(paths)], split)
    if os.path.exists(split_prefix + ".bin") and os.path.getsize(split_prefix + ".bin") == 0:
        # fairseq-preprocess writes an empty .bin for an empty text file; mmap then fails obscurely
        raise ValueError(f"split {split!r} ({split_prefix}.bin) has no lines: was its text file empty?")
    tokens = data_utils.load_indexed_dataset(split_prefix, dictionary, combine=combine)
    if tokens is None:
        raise FileNotFoundError(f"dataset not found: split {split!r} ({split_prefix}.bin/.idx)")
    check_token_ids(tokens, split_prefix, dictionary)
    rules = side_info_names if isinstance(side_info_names, Mapping) else {n: FINITE for n in side_info_names}
    unchecked = bool(getattr(cfg, "side_info_without_fingerprint", False))
    checksum = bool(getattr(cfg, "verify_data", False))
    side = {name: load_side_info(split_prefix, name, tokens, split, rule, unchecked, checksum)
            for name, rule in rules.items()}

    def block(dataset, prepend):
        # shorten to tokens_per_sample - framing (fairseq masked_lm uses tokens_per_sample, so a
        # full-length line plus <s> exceeds the model's positions in "complete"/"eos" modes)
        dataset = maybe_shorten_dataset(dataset, split, cfg.shorten_data_split_list,
                                        cfg.shorten_method, cfg.tokens_per_sample - framing, cfg.seed)
        dataset = TokenBlocks(dataset, dataset.sizes, cfg.tokens_per_sample - framing,  # room for <s> (</s>)
                                    pad=dictionary.pad(), eos=dictionary.eos(),
                                    break_mode=cfg.sample_break_mode)
        return PrependTokenDataset(dataset, prepend)

    return block(tokens, dictionary.bos()), {name: block(ds, 0) for name, ds in side.items()}


def check_block_sizes(sizes, split: str, cfg) -> None:
    """Refuse items longer than ``--tokens-per-sample`` (a task's model has no more positions).

    With ``--sample-break-mode complete``, ``complete_doc`` or ``eos`` a line longer than
    the block stays whole unless ``--shorten-method`` shortens it; fairseq would only stop
    at the first batch holding it ("Size of sample #N is invalid"), in validation after a
    whole training epoch.
    """
    sizes = np.asarray(sizes)
    too_long = sizes > cfg.tokens_per_sample
    if too_long.any():
        raise ValueError(
            f"split {split!r}: {int(too_long.sum())} of {len(sizes)} items are longer than --tokens-per-sample "
            f"{cfg.tokens_per_sample} (longest {int(sizes.max())} tokens with <s>) under --sample-break-mode "
            f"{cfg.sample_break_mode}: add --shorten-method truncate (or random_crop), or raise --tokens-per-sample")

"""Load a split and block it for MLM; side information goes through the very same steps."""

import os
from typing import Dict, Sequence, Tuple

from fairseq import utils
from fairseq.data import PrependTokenDataset, TokenBlockDataset, data_utils
from fairseq.data.shorten_dataset import maybe_shorten_dataset

from .side_info import load_side_info


def load_blocked_split(cfg, split: str, dictionary, side_info_names: Sequence[str] = (),
                       epoch: int = 1, combine: bool = False) -> Tuple[object, Dict[str, object]]:
    """Return ``(tokens, {name: side_info})``, both shortened, blocked and prefixed alike.

    The pipeline is fairseq ``masked_lm``'s: ``load_indexed_dataset`` ->
    ``maybe_shorten_dataset`` -> ``TokenBlockDataset(tokens_per_sample - 1)`` ->
    ``PrependTokenDataset(<s>)``. Side information is verified line by line against the
    token data and then passed through the same function with the same ``cfg``, so a
    block of side information always covers exactly the tokens of its block (its
    ``<s>`` position gets the value 0).
    """
    paths = utils.split_paths(cfg.data)
    split_prefix = os.path.join(paths[(epoch - 1) % len(paths)], split)
    tokens = data_utils.load_indexed_dataset(split_prefix, dictionary, combine=combine)
    if tokens is None:
        raise FileNotFoundError(f"dataset not found: split {split!r} ({split_prefix}.bin/.idx)")
    if len(tokens) == 0:
        raise ValueError(f"split {split!r} ({split_prefix}) has no lines")
    side = {name: load_side_info(split_prefix, name, tokens, split) for name in side_info_names}

    def block(dataset, prepend):
        dataset = maybe_shorten_dataset(dataset, split, cfg.shorten_data_split_list,
                                        cfg.shorten_method, cfg.tokens_per_sample, cfg.seed)
        dataset = TokenBlockDataset(dataset, dataset.sizes, cfg.tokens_per_sample - 1,  # room for <s>
                                    pad=dictionary.pad(), eos=dictionary.eos(),
                                    break_mode=cfg.sample_break_mode)
        return PrependTokenDataset(dataset, prepend)

    return block(tokens, dictionary.bos()), {name: block(ds, 0) for name, ds in side.items()}

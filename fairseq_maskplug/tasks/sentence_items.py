"""What tasks with one sentence per item share (``joint_mlm_classification``, ``token_importance``,
``span_policy``, ``meta_span_policy``)."""

import contextlib
from types import SimpleNamespace

import numpy as np
from fairseq.data import (IdDataset, NestedDictionaryDataset, NumelDataset, NumSamplesDataset, RightPadDataset,
                          SortDataset, data_utils)
from omegaconf import OmegaConf, open_dict

from .model_checks import check_model


def sentence_blocking(data: str, tokens_per_sample: int, seed: int,
                      side_info_without_fingerprint: bool = False, verify_data: bool = False) -> SimpleNamespace:
    """Blocking options for :func:`~fairseq_maskplug.data.load_blocked_split`: one line of
    ``data`` per item (``<s>`` + line), lines longer than the item truncated."""
    return SimpleNamespace(data=data, sample_break_mode="eos", tokens_per_sample=tokens_per_sample,
                           shorten_method="truncate", shorten_data_split_list="", seed=seed,
                           side_info_without_fingerprint=side_info_without_fingerprint, verify_data=verify_data)


def tagged_items(tokens, target, dictionary, seed: int):
    """The dataset of a token-head task (one sentence per item): ``net_input`` (right-padded
    tokens, lengths), ``target`` as given, sentence and token counts; shuffled once by
    ``seed`` (fairseq batches it by size within that order)."""
    dataset = NestedDictionaryDataset(
        {
            "id": IdDataset(),
            "net_input": {"src_tokens": RightPadDataset(tokens, pad_idx=dictionary.pad()),
                          "src_lengths": NumelDataset(tokens, reduce=False)},
            "target": target,
            "nsentences": NumSamplesDataset(),
            "ntokens": NumelDataset(tokens, reduce=True),
        },
        sizes=[tokens.sizes],
    )
    with data_utils.numpy_seed(seed):
        shuffle = np.random.permutation(len(tokens))
    return SortDataset(dataset, sort_order=[shuffle])


def build_model_for_items(task, cfg, from_checkpoint=False):
    """fairseq's model for ``task``, its positions set to the task's ``tokens_per_sample``."""
    from fairseq import models

    with open_dict(cfg) if OmegaConf.is_config(cfg) else contextlib.ExitStack():
        cfg.max_positions = task.cfg.tokens_per_sample
    model = models.build_model(cfg, task, from_checkpoint)
    check_model(task, model, getattr(cfg, "_name", None) or getattr(cfg, "arch", "?"), encoder_decoder=False)
    return model

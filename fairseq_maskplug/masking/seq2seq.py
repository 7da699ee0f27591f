"""Target formats: turn a policy's choice into a text-to-text (source, target) pair.

Ye, Li et al. (2021, "On the Influence of Masking Policies in Intermediate Pre-training",
the heuristic rows of their Table 1) train BART on pairs built from masked text:

* **full** (+Orig): source = the block with the chosen tokens masked, target = the
  original block (BART's own denoising target).
* **masked** (+Rand, +SSM): target = only the chosen tokens, in order.

The paper does not state how several masked pieces are laid out in a target, and BART's
dictionary has a single ``<mask>`` and no T5 sentinels. This package's format, which
needs no new symbol: the *runs* of consecutive chosen positions, in order, separated by
``<mask>``, then ``</s>`` (no ``<s>``: the layout of fairseq translation targets, so a
closed-book answer ``Charles Schulz </s>`` has exactly the shape of a one-span target)::

    tokens  <s> a  b  c  d  e </s>      chosen: b c, e
    source  <s> a <mask> <mask> d <mask> </s>     (collapse off)
    source  <s> a <mask> d <mask> </s>            (collapse on: one <mask> per run)
    target  b c <mask> e </s>                      (masked)
    target  <s> a b c d e </s>                     (full)

* **t5** (Raffel et al. 2020, §3.1.4 "span corruption", Fig. 2): each run of chosen positions
  becomes one sentinel in the source, the k-th run ``<extra_id_k>``; the target is each sentinel
  followed by its run, then one more sentinel and ``</s>``::

    tokens  <s> a  b  c  d  e </s>      chosen: b c, e
    source  <s> a <extra_id_0> d <extra_id_1> </s>
    target  <extra_id_0> b c <extra_id_1> e <extra_id_2> </s>

The k-th ``<mask>`` of a collapsed source stands for the k-th run of the target.
``collapse`` is BART's text infilling (Lewis et al. 2020, §2.2: a span becomes one
``<mask>``) and the paper's single-``<mask>`` examples. Every chosen token becomes
``<mask>`` unless a :class:`Corruption` with non-zero 80/10/10 shares is given; then
collapsing merges only runs whose tokens all became ``<mask>``.
"""

from typing import Optional, Tuple

import numpy as np

from .corruption import Corruption, corrupt
from .random_masks import maskable_runs

TARGET_FORMATS = ("full", "masked", "t5")


def chosen_runs(mask: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """``(starts, ends)`` of the runs of consecutive chosen positions (ends exclusive)."""
    return maskable_runs(mask)


def collapse_runs(source: np.ndarray, collapsible: np.ndarray) -> np.ndarray:
    """Drop every position of ``source`` that continues a run of ``collapsible`` positions:
    each run keeps its first token only (BART text infilling, ``replace_length=1``)."""
    collapsible = np.asarray(collapsible, dtype=bool)
    if collapsible.shape != source.shape:
        raise ValueError(f"collapsible shape {collapsible.shape} does not match source {source.shape}")
    continues = collapsible.copy()
    continues[1:] &= collapsible[:-1]
    continues[0] = False
    return source[~continues]


def seq2seq_source(tokens: np.ndarray, mask: np.ndarray, mask_idx: int, collapse: bool,
                   rng: Optional[np.random.Generator] = None,
                   corruption: Optional[Corruption] = None) -> np.ndarray:
    """The encoder input: chosen positions replaced by ``<mask>`` (or 80/10/10 with
    ``corruption``, drawing from ``rng``), runs of ``<mask>`` collapsed when ``collapse``."""
    tokens = np.asarray(tokens)
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != tokens.shape:
        raise ValueError(f"mask shape {mask.shape} does not match tokens {tokens.shape}")
    if corruption is None:
        source = tokens.copy()
        source[mask] = mask_idx
    else:
        if rng is None:
            raise ValueError("80/10/10 corruption needs a generator")
        source = corrupt(tokens, mask, rng, corruption)
    if collapse:
        source = collapse_runs(source, mask & (source == mask_idx))
    return source


def seq2seq_target(tokens: np.ndarray, mask: np.ndarray, target_format: str, mask_idx: int,
                   eos: int) -> np.ndarray:
    """The decoder target in ``target_format`` (module docstring); ``tokens`` is the block
    with its ``<s>`` and ``</s>``."""
    tokens = np.asarray(tokens)
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != tokens.shape:
        raise ValueError(f"mask shape {mask.shape} does not match tokens {tokens.shape}")
    if target_format == "full":
        return tokens.copy()
    if target_format != "masked":
        raise ValueError(f"unknown target format {target_format!r} here; choose full or masked (t5: t5_pair)")
    pieces = []
    for k, (start, end) in enumerate(zip(*chosen_runs(mask))):
        if k:
            pieces.append([mask_idx])
        pieces.append(tokens[start:end])
    pieces.append([eos])
    return np.concatenate(pieces).astype(tokens.dtype)


def t5_pair(tokens: np.ndarray, mask: np.ndarray, sentinels, eos: int) -> Tuple[np.ndarray, np.ndarray]:
    """T5's span corruption (module docstring): ``(source, target)`` with ``sentinels[k]`` for the
    k-th run of chosen positions; the target ends with the next sentinel and ``eos``. Refuses a
    block with more runs than ``len(sentinels) - 1``."""
    tokens = np.asarray(tokens)
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != tokens.shape:
        raise ValueError(f"mask shape {mask.shape} does not match tokens {tokens.shape}")
    starts, ends = chosen_runs(mask)
    if len(starts) + 1 > len(sentinels):
        raise ValueError(f"a block with {len(starts)} masked runs needs {len(starts) + 1} sentinels, and "
                         f"--t5-sentinels gives {len(sentinels)}: raise it, or mask fewer runs")
    source, target, previous = [], [], 0
    for k, (start, end) in enumerate(zip(starts, ends)):
        source += [tokens[previous:start], [sentinels[k]]]
        target += [[sentinels[k]], tokens[start:end]]
        previous = end
    source.append(tokens[previous:])
    target.append([sentinels[len(starts)], eos])
    return np.concatenate(source).astype(tokens.dtype), np.concatenate(target).astype(tokens.dtype)


def previous_output_tokens(target: np.ndarray, eos: int) -> np.ndarray:
    """Teacher-forcing decoder input: ``</s>`` followed by the target without its last token
    (fairseq's ``move_eos_to_beginning``; the target ends with ``</s>``)."""
    target = np.asarray(target)
    if target.size == 0 or target[-1] != eos:
        raise ValueError("a target must end with </s>")
    return np.concatenate([[eos], target[:-1]]).astype(target.dtype)

"""Token pseudo-likelihoods (PLT) with a frozen fairseq roberta model (Kimura et al., §3.1).

PLL-word-l2r (Kimura et al., after Kauf & Ivanova 2023): to score subword ``t`` of word
``w``, mask ``t`` and every later subword of ``w`` (word starts: sentencepiece ``▁`` or
GPT-2 BPE through fairseq's whole-word helper); earlier subwords of ``w`` and all
other words stay visible; ``PLT_t = P(x_t | masked copy)``. ``original`` (Salazar et
al. 2020) masks only ``t``. One masked copy per scored token; the batched scorer packs
copies of many sentences into each forward under a token budget, sorted by length.
Exactly the token ids of the binarized data are scored (no re-tokenisation).

``unmasked`` is Self-Evolution's self-questioning pass (Zhong et al. 2023; the authors' ``trainer.py``
and ``cross_entropy.py`` of ``fairseq-self_questioning``): the model reads the sentence with nothing
masked and each token's value is ``P(x_t | x)`` at its own position; one forward per sentence.
"""

import math
from typing import Iterable, List, Sequence, Tuple

import numpy as np
import torch

from ..common.progress import progress_bar
from .batching import budget_runs

METRICS = ("word_l2r", "original", "unmasked")


def word_starts_sentencepiece(dictionary) -> np.ndarray:
    """Vocabulary mask: True for symbols that begin a word (sentencepiece ``▁`` prefix) and specials."""
    starts = np.array([sym.startswith("\u2581") for sym in dictionary.symbols])
    starts[:dictionary.nspecial] = True
    return starts


def word_starts_gpt2(dictionary, encoder_json: str, vocab_bpe: str) -> np.ndarray:
    """Vocabulary mask for a GPT-2 BPE dictionary (symbols are BPE ids), from fairseq's whole-word helper.

    A symbol begins a word when its decoded text starts with a space; special symbols
    and fairseq's ``madeupword`` padding count as word starts. Needs the ``encoder.json``
    and ``vocab.bpe`` the data was encoded with (local paths).
    """
    from argparse import Namespace

    from fairseq.data.encoders.utils import get_whole_word_mask

    args = Namespace(bpe="gpt2", gpt2_encoder_json=encoder_json, gpt2_vocab_bpe=vocab_bpe)
    return get_whole_word_mask(args, dictionary).numpy().astype(bool)


def masked_copies(tokens: np.ndarray, scored: np.ndarray, word_start: np.ndarray,
                  metric: str = "word_l2r") -> List[Tuple[int, np.ndarray]]:
    """``(target position, positions to mask)`` for every scored position of one sequence.

    Args:
        tokens: the sequence as the model sees it.
        scored: True at the positions to score (not at special tokens).
        word_start: True where a token begins a word (per position).
        metric: ``word_l2r`` or ``original``.
    """
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    if metric == "unmasked":
        return [(int(j), np.zeros(0, dtype=np.int64)) for j in np.flatnonzero(scored)]
    copies = []
    n = len(tokens)
    for j in np.flatnonzero(scored):
        end = j + 1
        if metric == "word_l2r":
            while end < n and scored[end] and not word_start[end]:
                end += 1
        copies.append((int(j), np.arange(j, end)))
    return copies


def _log_probs(model, batch: torch.Tensor, targets_mask: torch.Tensor, target_ids: torch.Tensor):
    logits = model(batch, masked_tokens=targets_mask)[0]
    return torch.log_softmax(logits, dim=-1, dtype=torch.float32).gather(1, target_ids[:, None])[:, 0]


class PLTScorer:
    """Scores sequences with a frozen masked-LM ``model`` (fairseq roberta).

    Args:
        model: the model (put in eval mode, gradients off).
        mask_idx, pad_idx: ``<mask>`` and ``<pad>`` ids of its dictionary.
        word_start_vocab: vocabulary mask of word-initial symbols (for ``word_l2r``).
        metric: ``word_l2r`` (default, the paper) or ``original``.
    """

    def __init__(self, model, mask_idx: int, pad_idx: int, word_start_vocab: np.ndarray,
                 metric: str = "word_l2r"):
        self.model = model.eval()
        self.mask_idx, self.pad_idx = mask_idx, pad_idx
        self.word_start_vocab = word_start_vocab
        self.metric = metric
        self.device = next(model.parameters()).device

    def _copies(self, tokens: np.ndarray, special_ids: Sequence[int]):
        scored = ~np.isin(tokens, list(special_ids))
        return masked_copies(tokens, scored, self.word_start_vocab[tokens], self.metric)

    @torch.no_grad()
    def score_naive(self, sequences: Sequence[np.ndarray], special_ids) -> List[np.ndarray]:
        """Reference: one masked copy per forward. Special tokens get PLT 1."""
        out = []
        for tokens in sequences:
            plt = np.ones(len(tokens))
            for j, masked in self._copies(tokens, special_ids):
                copy = torch.as_tensor(tokens, device=self.device).clone()
                copy[masked] = self.mask_idx
                target = torch.zeros(1, len(tokens), dtype=torch.bool, device=self.device)
                target[0, j] = True
                lp = _log_probs(self.model, copy[None], target, torch.as_tensor([tokens[j]], device=self.device))
                plt[j] = math.exp(float(lp[0]))
            out.append(plt)
        return out

    @torch.no_grad()
    def score(self, sequences: Sequence[np.ndarray], special_ids, max_tokens: int = 2048,
              progress: bool = True) -> List[np.ndarray]:
        """Batched: copies of many sequences per forward, at most ``max_tokens`` (padded) tokens each.

        Copies are sorted by length so that batches hold similar lengths; returns one
        PLT array per sequence (special tokens 1), identical to :meth:`score_naive`
        up to float rounding. ``unmasked``: whole sequences per forward (:meth:`_score_unmasked`).
        """
        if self.metric == "unmasked":
            return self._score_unmasked(sequences, special_ids, max_tokens, progress)
        jobs = []  # (length, sequence index, target position, masked positions)
        for s, tokens in enumerate(sequences):
            if len(tokens) > max_tokens:
                raise ValueError(f"sequence {s} has {len(tokens)} tokens, more than --max-tokens {max_tokens}")
            jobs.extend((len(tokens), s, j, masked) for j, masked in self._copies(tokens, special_ids))
        jobs.sort(key=lambda job: job[0])
        out = [np.ones(len(t)) for t in sequences]
        bar = progress_bar(total=len(jobs), desc="PLT", unit="copy", disable=None if progress else True)
        for i, k in budget_runs([job[0] for job in jobs], max_tokens):
            chunk = jobs[i:k]
            batch, target, ids = self._batch(chunk, sequences)
            lp = _log_probs(self.model, batch.to(self.device), target.to(self.device), ids.to(self.device))
            for (length, s, j, masked), value in zip(chunk, lp.exp().tolist()):
                out[s][j] = value
            bar.update(len(chunk))
        bar.close()
        return out

    def _score_unmasked(self, sequences, special_ids, max_tokens: int, progress: bool) -> List[np.ndarray]:
        """``P(x_t | x)`` at every non-special position, the sequences unmasked, several per forward (sorted by
        length, at most ``max_tokens`` padded tokens)."""
        order = sorted(range(len(sequences)), key=lambda s: len(sequences[s]))
        lengths = [len(sequences[s]) for s in order]
        if lengths and lengths[-1] > max_tokens:
            raise ValueError(f"a sequence has {lengths[-1]} tokens, more than --max-tokens {max_tokens}")
        out = [np.ones(len(t)) for t in sequences]
        bar = progress_bar(total=len(order), desc="P(token)", unit="line", disable=None if progress else True)
        for i, k in budget_runs(lengths, max_tokens):
            chunk = order[i:k]
            batch = np.full((len(chunk), max(lengths[i:k])), self.pad_idx, dtype=np.int64)
            for r, s in enumerate(chunk):
                batch[r, :len(sequences[s])] = sequences[s]
            target = torch.from_numpy((batch != self.pad_idx) & ~np.isin(batch, list(special_ids)))
            batch = torch.from_numpy(batch)
            lp = _log_probs(self.model, batch.to(self.device), target.to(self.device),
                            batch[target].to(self.device)).exp().tolist()
            rows, cols = np.nonzero(target.numpy())
            for r, j, value in zip(rows, cols, lp):
                out[chunk[r]][j] = value
            bar.update(len(chunk))
        bar.close()
        return out

    def _batch(self, chunk, sequences):
        """``(tokens, target mask, target ids)`` of a run of copies, built in numpy: row by row in torch
        it cost 83 us per copy on this project's CPU, 2.4 us so (more than an H100's forward of a copy)."""
        rows = np.arange(len(chunk))
        width = max(job[0] for job in chunk)
        batch = np.full((len(chunk), width), self.pad_idx, dtype=np.int64)
        for r, (length, s, _, _) in enumerate(chunk):
            batch[r, :length] = sequences[s]
        positions = np.array([j for _, _, j, _ in chunk])
        ids = batch[rows, positions].copy()
        batch[np.repeat(rows, [len(masked) for *_, masked in chunk]), np.concatenate([m for *_, m in chunk])] = \
            self.mask_idx
        target = np.zeros((len(chunk), width), dtype=bool)
        target[rows, positions] = True
        return torch.from_numpy(batch), torch.from_numpy(target), torch.from_numpy(ids)


def score_in_windows(scorer: "PLTScorer", lines: Sequence[np.ndarray], special_ids, max_positions: int,
                     max_tokens: int = 2048, progress: bool = True) -> List[np.ndarray]:
    """:meth:`PLTScorer.score` for lines (``<s> ... </s>``) of any length.

    A line longer than ``max_positions`` (which would overflow the position embedding) is
    cut between its ``<s>`` and ``</s>`` into consecutive pieces of ``max_positions - 2``
    tokens, each scored framed as ``<s> piece </s>``, the way the tagger reads long lines:
    a token then sees only the context of its own window, and a word cut at a window
    boundary is scored as two words.
    """
    if max_positions < 3:
        raise ValueError(f"max_positions must be at least 3 (<s>, a token, </s>), got {max_positions}")
    width = max_positions - 2
    windows, origins = [], []  # origins: (line, where the window's inner tokens start; None: whole line)
    for i, line in enumerate(lines):
        if len(line) <= max_positions:
            windows.append(line)
            origins.append((i, None))
            continue
        for start in range(1, len(line) - 1, width):
            windows.append(np.concatenate([line[:1], line[start:min(start + width, len(line) - 1)], line[-1:]]))
            origins.append((i, start))
    scored = scorer.score(windows, special_ids, max_tokens, progress)
    out = [np.ones(len(line)) for line in lines]
    for (i, start), plt in zip(origins, scored):
        if start is None:
            out[i] = plt
        else:
            out[i][start:start + len(plt) - 2] = plt[1:-1]
    return out


def iterate_lines(dataset, bos: int) -> Iterable[np.ndarray]:
    """Lines of a binarized token dataset with ``<s>`` prepended, as the model sees them."""
    for i in range(len(dataset)):
        yield np.concatenate([[bos], dataset[i].numpy()])

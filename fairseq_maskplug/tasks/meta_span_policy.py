"""``--task meta_span_policy``: train the meta-learned span policy (Ye, Li et al. 2021,
"+Meta-learned": a policy trained so that the text-to-text model "learns the downstream task
quickly"). The formulation is ours (the paper's is not reachable here):

* the policy φ is the span scorer of ``span_policy`` (roberta + start/end head, same
  checkpoints, same ``preprocess.score_spans``);
* a batch holds corpus sentences (``--data``, one per item) and, per sentence,
  ``--meta-candidates`` candidate spans drawn uniformly among its allowed spans; the policy
  gives them ``π_φ(s) = softmax(start_i + end_j)`` over that sentence's candidates;
* the seq2seq model θ is the frozen checkpoint ``--seq2seq-checkpoint`` (the general BART
  the policy will mask for), in eval mode (no dropout); its loss ``L_n`` on each
  candidate's example (span → one ``<mask>``, target = the span) is the mean NLL per
  target token;
* one virtual SGD step ``θ' = θ − α ∇θ (1/B) Σ_b Σ_s π_φ(s|b) L_bs(θ)`` (``α`` =
  ``--meta-inner-lr``); the loss trained is the downstream loss ``L_task(θ')`` (mean NLL
  per answer token) on ``--meta-downstream-batch`` pairs of the downstream **training**
  split (``--downstream-data``, fairseq translation data), drawn from
  ``default_rng((seed, update))``: a resumed run draws the same pairs;
* its gradient w.r.t. φ flows through θ' (:mod:`fairseq_maskplug.criterions.lookahead`:
  ``--meta-gradient exact`` second order, or ``finite_difference`` as DARTS eq. 8).

θ stays the general model: the policy learns which spans, trained on from the model it
will mask for, help the downstream task most. Validation reports the same loss on the
downstream valid split. Logged: ``loss`` (L_task(θ')), ``task_before`` (L_task(θ)),
``gain`` (their difference, positive when the step helped), ``inner`` and ``entropy``
(of π, in bits, averaged over sentences).
"""

import logging
import os
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import torch
from fairseq import checkpoint_utils, models
from fairseq.data import LanguagePairDataset, SortDataset, data_utils
from fairseq.dataclass import ChoiceEnum
from fairseq.tasks import register_task
from omegaconf import MISSING

from ..common.option_ranges import option
from ..data import load_blocked_split
from ..data.dictionaries import check_checkpoint_dictionary, check_token_ids
from ..data.layout import check_hydra_path
from ..data.meta_span_dataset import MetaSpanDataset
from ..criterions.lookahead import MODES
from .sentence_items import sentence_blocking
from .span_policy import SpanPolicyTask, SpanScorerConfig

logger = logging.getLogger(__name__)


@dataclass
class MetaSpanPolicyConfig(SpanScorerConfig):
    data: str = option(MISSING, "binarized intermediate corpus (dict.txt, SPLIT.bin/.idx), one sentence per line")
    downstream_data: str = option(MISSING, "fairseq translation data of the downstream task (train and valid "
                                  "splits); its dictionary must be the corpus dictionary plus <mask>")
    downstream_source_lang: str = option("q", "source language of --downstream-data")
    downstream_target_lang: str = option("a", "target language of --downstream-data")
    seq2seq_checkpoint: str = option(MISSING, "the text-to-text model (a guided_denoising or translation checkpoint "
                                     "of a BART) the policy masks for; frozen")
    candidate_max_length: int = option(10, "longest candidate span in tokens (as the learned_span policy's "
                                       "--learned-max-length)", range="[1, inf)", source="ours")
    meta_candidates: int = option(8, "candidate spans per sentence, drawn uniformly among its allowed spans (ours)",
                                  range="[1, inf)", source="ours")
    meta_inner_lr: float = option(0.1, "alpha: the virtual SGD step on the seq2seq model", range="(0, inf)",
                                  source="ours")
    meta_downstream_batch: int = option(16, "downstream pairs in the outer loss of each step", range="[1, inf)",
                                        source="ours")
    meta_gradient: ChoiceEnum(list(MODES)) = option("exact", "exact: second-order autograd through the virtual step; "
                                                    "finite_difference: DARTS eq. 8 (no second-order graph, for "
                                                    "large models)",
                                                    source="ours (the paper's meta-objective is not stated)")
    meta_fd_epsilon: float = option(0.01, "finite_difference: epsilon = this / norm of the downstream gradient "
                                    "(DARTS)", range="(0, inf)", source="DARTS")


def load_seq2seq(path: str, dictionary, corpus: str):
    """The seq2seq model of ``path`` built over ``dictionary`` (the ``corpus`` directory's dict.txt
    plus ``<mask>``), frozen in eval mode, after checking that it was trained with that dict.txt:
    the fingerprint the checkpoint records, else its training data's dict.txt
    (``check_checkpoint_dictionary``); a checkpoint with neither (a released BART) is checked by
    its number of embeddings only."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"--seq2seq-checkpoint not found: {path}")
    state = checkpoint_utils.load_checkpoint_to_cpu(path)
    try:
        check_checkpoint_dictionary(state, path, corpus, trust=True)
    except ValueError as error:
        raise ValueError(f"--seq2seq-checkpoint: {error}") from None
    cfg = state["cfg"]
    holder = SimpleNamespace(source_dictionary=dictionary, target_dictionary=dictionary)
    model = models.build_model(cfg.model, holder)
    if not hasattr(model, "decoder"):
        raise ValueError(f"--seq2seq-checkpoint {path} holds a {type(model).__name__}, not an encoder-decoder model")
    rows = state["model"]["encoder.embed_tokens.weight"].shape[0]
    if rows != len(dictionary):
        raise ValueError(f"--seq2seq-checkpoint {path} has {rows} embeddings; the corpus dictionary plus <mask> has "
                         f"{len(dictionary)}: train the seq2seq model on this corpus's dictionary")
    model.load_state_dict(state["model"], strict=True, model_cfg=cfg.model)
    return model.eval()


@register_task("meta_span_policy", dataclass=MetaSpanPolicyConfig)
class MetaSpanPolicyTask(SpanPolicyTask):
    """Meta-learn the span policy through one virtual step of the seq2seq model."""

    criteria = ("meta_span_policy",)

    cfg: MetaSpanPolicyConfig

    def __init__(self, cfg, dictionary):
        super().__init__(cfg, dictionary)
        for key in ("downstream_data", "seq2seq_checkpoint"):
            check_hydra_path(getattr(cfg, key), f"task.{key}")
        self.downstream = {}
        self._seq2seq = None

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        blocking = sentence_blocking(self.cfg.data, self.cfg.tokens_per_sample, self.cfg.seed)
        # framing 2: a line truncated to --tokens-per-sample keeps room for the </s> the dataset appends
        tokens, _ = load_blocked_split(blocking, split, self.dictionary, {}, epoch, combine, framing=2)
        d = self.dictionary
        dataset = MetaSpanDataset(tokens, self.cfg.meta_candidates, self.cfg.candidate_max_length, self.mask_idx,
                                  (d.bos(), d.eos(), d.pad(), self.mask_idx), d.eos(), d.pad(), self.cfg.seed)
        with data_utils.numpy_seed(self.cfg.seed):
            shuffle = np.random.permutation(len(tokens))
        self.datasets[split] = SortDataset(dataset, sort_order=[shuffle])
        self.downstream_split(split)  # refused now, before training, when missing
        if self._seq2seq is None:
            self.seq2seq("cpu")  # loaded and checked now, before training (moved to the device at first use)
        logger.info("%s: %d sentences, downstream %s: %d pairs", split, len(tokens), split,
                    len(self.downstream[split]))

    def downstream_split(self, split: str) -> LanguagePairDataset:
        """The downstream pairs of ``split`` (``train`` for training, others for validation)."""
        if split not in self.downstream:
            src, tgt = self.cfg.downstream_source_lang, self.cfg.downstream_target_lang
            root = self.cfg.downstream_data
            sides = {}
            for lang in (src, tgt):
                d = self._downstream_dictionary(root, lang)
                prefix = os.path.join(root, f"{split}.{src}-{tgt}.{lang}")
                sides[lang] = data_utils.load_indexed_dataset(prefix, d)
                if sides[lang] is None:
                    raise FileNotFoundError(f"downstream split not found: {prefix}.bin/.idx")
                check_token_ids(sides[lang], prefix, d, allowed=("<mask>",) if lang == src else ())  # cloze
            self.downstream[split] = LanguagePairDataset(
                sides[src], sides[src].sizes, self.dictionary, sides[tgt], sides[tgt].sizes, self.dictionary,
                left_pad_source=False, left_pad_target=False)
        return self.downstream[split]

    def _downstream_dictionary(self, root: str, lang: str):
        from fairseq.data import Dictionary

        path = os.path.join(root, f"dict.{lang}.txt")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"downstream dictionary not found: {path}")
        d = Dictionary.load(path)
        if d.symbols != self.dictionary.symbols:
            raise ValueError(f"{path} is not the corpus dictionary plus <mask> ({len(d)} vs {len(self.dictionary)} "
                             "symbols): binarize the downstream task with the corpus dictionary")
        return d

    def downstream_batch(self, split: str, key) -> dict:
        """``--meta-downstream-batch`` pairs of ``split``, drawn from ``default_rng((seed, *key))``."""
        pairs = self.downstream_split(split)
        rng = np.random.default_rng((self.cfg.seed, *key))
        size = min(self.cfg.meta_downstream_batch, len(pairs))
        return pairs.collater([pairs[int(i)] for i in np.sort(rng.choice(len(pairs), size=size, replace=False))])

    def seq2seq(self, device):
        """The frozen seq2seq model θ, loaded at first use, on ``device``, in float32 whatever the
        precision flags (the lookahead's virtual step and finite differences need float32's range)."""
        if self._seq2seq is None:
            self._seq2seq = load_seq2seq(self.cfg.seq2seq_checkpoint, self.dictionary, self.cfg.data).float()
            for p in self._seq2seq.parameters():
                p.requires_grad_(False)
        return self._seq2seq.to(device)

    def evaluation_step(self, sample, model, criterion):
        model.eval()
        with torch.enable_grad():  # the virtual step needs gradients even in validation
            loss, sample_size, logging_output = criterion(model, sample)
        return loss.detach(), sample_size, logging_output

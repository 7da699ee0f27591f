"""``--task guided_denoising``: BART-style text-to-text training where a registered policy
chooses what to mask (Ye, Li et al. 2021, "On the Influence of Masking Policies in
Intermediate Pre-training").

The paper's heuristic rows are one flag each (15% random tokens for +Orig and +Rand)::

    +Orig  --mask-policy random       --target-format full
    +Rand  --mask-policy random       --target-format masked
    +SSM   --mask-policy salient_span --target-format masked

``--target-format t5`` is T5's span corruption (Raffel et al. 2020, §3.1.4): one sentinel per
run of chosen positions in the source, each sentinel and its run in the target; the sentinels
``<extra_id_0>`` ... are added to the dictionary (so the model needs that dictionary: train from
scratch, or from a checkpoint trained with the same format and ``--t5-sentinels``).
"""

from dataclasses import dataclass

from fairseq.data import LanguagePairDataset
from fairseq.dataclass import ChoiceEnum

from ..common.option_ranges import option
from ..data.denoising_dataset import PolicyDenoisingDataset
from ..masking.seq2seq import TARGET_FORMATS
from .masked_lm_base import MaskedLMBaseTask, MaskedLMDataConfig
from .policy_options import register_policy_task

#: ``--collapse-spans``: one <mask> per run of chosen positions (on), per chosen token (off), or by the policy
COLLAPSE = ("auto", "on", "off")

T5_SENTINELS = 100  # T5's extra ids


@dataclass
class GuidedDenoisingConfig(MaskedLMDataConfig):
    mask_policy: str = option("random", "registered mask policy that chooses the positions to mask (random, span, "
                              "salient_span, learned_span, selective, l3, ...; plugins add more)")
    target_format: ChoiceEnum(list(TARGET_FORMATS)) = option("masked", "full: the target is the original block "
                                                             "(+Orig, BART); masked: only the chosen tokens, runs "
                                                             "separated by <mask>, then </s> (+Rand, +SSM; the paper "
                                                             "states no format); t5: T5's span corruption, one "
                                                             "sentinel <extra_id_k> per run in the source, sentinel "
                                                             "+ run in the target", source="paper (+Rand)")
    t5_sentinels: int = option(T5_SENTINELS, "target format t5: sentinel symbols <extra_id_0> ... <extra_id_N-1> added to "
                               "the dictionary; a block may hold at most N-1 masked runs", range="[2, inf)",
                               source="T5 (100 extra ids)")
    collapse_spans: ChoiceEnum(list(COLLAPSE)) = option(
        "auto", "on: one <mask> per run of chosen positions in the source (BART text infilling); off: one <mask> per "
        "chosen token; auto: on for span policies (span, salient_span, ...), off for token policies (random, "
        "selective, l3). Checkpoints saved with the old --collapse-spans / --no-collapse-spans load as on / off",
        source="BART (text infilling, for span policies)")
    # the paper's examples replace every chosen token by <mask>: no 80/10/10 unless asked
    leave_unmasked_prob: float = option(0.0, "share of chosen positions left unchanged (BERT's 80/10/10 rule: 0.1; "
                                        "paper's examples: 0)", range="[0, 1]",
                                        source="paper (its examples: every chosen token becomes <mask>)")
    random_token_prob: float = option(0.0, "share of chosen positions replaced by a random token (BERT's 80/10/10 "
                                      "rule: 0.1; paper's examples: 0)", range="[0, 1]",
                                      source="paper (its examples: every chosen token becomes <mask>)")


@register_policy_task("guided_denoising", dataclass=GuidedDenoisingConfig)
class GuidedDenoisingTask(MaskedLMBaseTask):
    """Text-to-text denoising for fairseq's BART models (``bart_base``, ``bart_large``,
    ``bart_tiny``, any encoder-decoder) with a pluggable mask policy.

    Data, blocking, side information and determinism are ``guided_mlm``'s: the
    ``fairseq-preprocess --only-source`` blocks, each ``<s> ... </s>`` (a ``</s>`` is appended
    to a block cut inside a line), masked per (seed, epoch, index). Train with fairseq's
    ``cross_entropy`` or ``label_smoothed_cross_entropy``. Logged ``mask_rate`` counts chosen
    positions over maskable tokens whatever the target format.
    """

    cfg: GuidedDenoisingConfig
    criteria = ("cross_entropy", "label_smoothed_cross_entropy")
    encoder_decoder = True
    framing_tokens = 2
    rate_schedule_refused = ("a text-to-text item's source and target are built from the whole mask (runs "
                             "collapsed, sentinels numbered), so a batch cannot be thinned to a rate afterwards; "
                             "set the policy's rate instead")

    def __init__(self, cfg, dictionary):
        super().__init__(cfg, dictionary)  # builds the policy (MaskedLMBaseTask)
        self.collapse = cfg.collapse_spans == "on" or (cfg.collapse_spans == "auto" and self.policy.chooses_spans)
        corrupting = cfg.leave_unmasked_prob > 0 or cfg.random_token_prob > 0
        self.seq2seq_corruption = self.corruption if corrupting else None
        if cfg.target_format != "t5" and cfg.t5_sentinels != T5_SENTINELS:
            raise ValueError(f"--t5-sentinels belongs to --target-format t5 (here {cfg.target_format}, which would "
                             "ignore it)")
        self.sentinels = self.add_sentinels(dictionary) if cfg.target_format == "t5" else ()

    def add_sentinels(self, dictionary):
        """T5's sentinels, added after ``<mask>``; refused with options that contradict the format
        and with data whose dictionary already holds a sentinel."""
        cfg = self.cfg
        if cfg.collapse_spans == "off":
            raise ValueError("--target-format t5 replaces each run by one sentinel: --collapse-spans off "
                             "contradicts it")
        if self.seq2seq_corruption is not None:
            raise ValueError("--target-format t5 replaces every chosen token by its run's sentinel (no 80/10/10): "
                             "give --leave-unmasked-prob 0 --random-token-prob 0")
        taken = [s for s in dictionary.symbols if s.startswith("<extra_id_")]
        if taken:
            raise ValueError(f"the data's dictionary already holds {taken[0]} ({len(taken)} symbols <extra_id_...>): "
                             "--target-format t5 adds its own sentinels; rename those symbols in the text")
        return [dictionary.add_symbol(f"<extra_id_{k}>") for k in range(cfg.t5_sentinels)]

    def build_inputs(self, split, tokens, side_info):
        d = self.dictionary
        return PolicyDenoisingDataset(tokens, side_info, self.policy, self.cfg.target_format, self.collapse,
                                      self.seq2seq_corruption, self.mask_idx, self.special_ids, eos=d.eos(),
                                      pad=d.pad(), seed=self.cfg.seed, sentinels=self.sentinels)

    def build_dataset_for_inference(self, src_tokens, src_lengths, **kwargs):
        """Sources as given (``<s> ... </s>`` with ``<mask>`` where text is to be filled in),
        for ``fairseq-interactive`` and the hub's ``generate``."""
        return LanguagePairDataset(src_tokens, src_lengths, self.source_dictionary,
                                   tgt_dict=self.target_dictionary, left_pad_source=False)

    def max_positions(self):
        return self.cfg.tokens_per_sample, self.cfg.tokens_per_sample

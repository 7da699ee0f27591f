"""``--mask-unit``: what any policy chooses, tokens or whole words (:mod:`fairseq_maskplug.masking.words`),
options every task with ``--mask-policy`` takes."""

from dataclasses import dataclass

from fairseq.dataclass import ChoiceEnum

from ..common.option_ranges import option
from ..data.word_boundaries import BOUNDARIES, word_start_symbols
from ..masking.words import with_words


@dataclass
class MaskUnitOptions:
    """What any policy chooses: tokens, or whole words (:mod:`fairseq_maskplug.masking.words`)."""

    mask_unit: ChoiceEnum(["token", "word"]) = option(
        "token", "token: the policy chooses subword tokens; word: it chooses whole words (its rate is then per word; "
        "entity and learned spans grow to whole words); both rates are logged (mask_rate, unit_mask_rate)",
        source="paper (every method masks subwords; word: ours, for any policy)")
    word_boundaries: ChoiceEnum(list(BOUNDARIES)) = option(
        "auto", "with --mask-unit word: where words start: sentencepiece (a piece with the word-start mark), gpt2 (a "
        "token with GPT-2's space byte; needs --gpt2-encoder-json), wordpiece (a converted BERT's data: a piece without ##), "
        "whitespace (every token is a word); auto reads dict.txt", source="fairseq (get_whole_word_mask's rule)")
    gpt2_encoder_json: str = option("", "with --mask-unit word on GPT-2 BPE data: the BPE's encoder.json")


def with_mask_unit(policy, cfg, dictionary):
    """``policy`` as ``--mask-unit`` asks (:func:`~fairseq_maskplug.masking.words.with_words`): itself for tokens
    (with each token's word where it reads them), a ``WordUnitPolicy`` for words; the word options where nothing
    reads them are refused."""
    if cfg.mask_unit == "token" and not policy.reads_words:
        given = [flag for flag, value, default in (("--word-boundaries", cfg.word_boundaries, "auto"),
                                                   ("--gpt2-encoder-json", cfg.gpt2_encoder_json, ""))
                 if value != default]
        if given:
            raise ValueError(f"{' and '.join(given)} {'is' if len(given) == 1 else 'are'} read only with "
                             "--mask-unit word (or by a policy that reads words)")
    return with_words(policy, cfg.mask_unit, lambda: word_start_symbols(
        dictionary, cfg.word_boundaries, cfg.gpt2_encoder_json or None)[0])

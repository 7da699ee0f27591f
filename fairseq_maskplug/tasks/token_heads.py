"""What the tasks with a head over the tokens of one sentence per item share (``token_importance``,
``span_policy`` and through it ``meta_span_policy``): one dictionary (plus ``<mask>``, so that the
embeddings match the masked-LM checkpoints they start from), whose fingerprint the checkpoints
record; items of ``<s>`` + one line of ``--data``, with the targets a subclass makes from its label
track; a model of ``--tokens-per-sample`` positions with the subclass's head."""

import logging

from ..data import load_blocked_split
from ..data.dictionaries import STATE_KEY, dictionary_sha256, load_dictionary
from ..data.layout import required_data, token_data_dir
from ..masking.values import ValueRule
from .sentence_items import build_model_for_items, sentence_blocking, tagged_items
from .task_base import PackageTask

logger = logging.getLogger(__name__)


class TokenHeadTask(PackageTask):
    """Base: one sentence per item, a label track (``--label-track``, values following
    :attr:`label_rule`), targets from :meth:`targets` and a head from :meth:`register_head`."""

    #: what the label track may hold (checked over the whole split when it loads)
    label_rule: ValueRule
    #: what an item is, for the log
    item_name = "sentences"

    def __init__(self, cfg, dictionary):
        super().__init__(cfg)
        self.state.merge_state_dict({STATE_KEY: dictionary_sha256(dictionary)})  # saved in checkpoints
        self.dictionary = dictionary
        self.mask_idx = dictionary.add_symbol("<mask>")  # as the masked-LM tasks: same embedding size

    @classmethod
    def setup_task(cls, cfg, **kwargs):
        cfg.data = token_data_dir(required_data(cfg))  # a sentence_prediction root: its input0/
        return cls(cfg, load_dictionary(cfg.data))

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        blocking = sentence_blocking(self.cfg.data, self.cfg.tokens_per_sample, self.cfg.seed,
                                     self.cfg.side_info_without_fingerprint,
                                     self.cfg.verify_data)
        tokens, side = load_blocked_split(blocking, split, self.dictionary, {self.cfg.label_track: self.label_rule},
                                          epoch, combine)
        targets = self.targets(split, tokens, side[self.cfg.label_track])
        self.datasets[split] = tagged_items(tokens, targets, self.dictionary, self.cfg.seed)
        logger.info("%s: %d %s", split, len(tokens), self.item_name)

    def targets(self, split, tokens, labels):
        """The ``target`` dataset of ``split`` from its blocked label track."""
        raise NotImplementedError

    def register_head(self, model) -> None:
        raise NotImplementedError

    def build_model(self, cfg, from_checkpoint=False):
        model = build_model_for_items(self, cfg, from_checkpoint)
        self.register_head(model)
        return model

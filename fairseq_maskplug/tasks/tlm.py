"""``--task tlm``: TLM's joint task + MLM training from scratch (Yao et al. 2022, Sec. 3.2).

The joint classification + MLM task, plus the retrieved documents (``--tlm-external-data``,
binarized with the task's dictionary). Training alternates task batches and external
batches (:mod:`~fairseq_maskplug.data.tlm_schedule`: ρ1 = ``--tlm-external-ratio``
external batches per task batch). Losses (``--criterion tlm``):

* task batch: ``(ρ2 · L_mlm + L_cls) / (ρ2 + 1)``, ρ2 = ``--tlm-task-mlm-weight`` (the weighting
  component :class:`~fairseq_maskplug.weighting.FixedWeights` ``{mlm: ρ2, cls: 1}``, total ``ρ2 + 1``);
* external batch: ``L_mlm`` (the classification output times 0 keeps the head in the graph,
  as the authors do, so every parameter has a gradient under ``pytorch_ddp``).

Each loss is a mean (over masked tokens, over sentences) and every batch has sample size 1.
Both MLM parts take their masks from ``--mask-policy`` (its side information is read from
the task data and from the external data alike). Stage 2 (task-only fine-tuning) is the
same task with ``--tlm-external-ratio 0 --tlm-task-mlm-weight 0`` from the stage-1
checkpoint (``--finetune-from-model``) under a new ``--classification-head-name``: fairseq
then drops the stage-1 head when it loads the checkpoint and the new head starts fresh.
"""

import logging
from dataclasses import dataclass

import numpy as np
from fairseq.data import IdDataset, NestedDictionaryDataset, NumelDataset, NumSamplesDataset
from fairseq.data import iterators
from fairseq.dataclass import ChoiceEnum
from omegaconf import II

from ..common.option_ranges import option
from ..data import load_blocked_split
from ..data.dictionaries import load_dictionary
from ..data.layout import check_hydra_path
from ..data.tlm_schedule import EXTERNAL, RATIO_RULES, TASK, paper_ratio, schedule
from ..data.two_source_dataset import TwoSourceDataset
from ..weighting import FixedWeights
from .joint_mlm_classification import ClassificationMLMConfig, ClassificationMLMTask
from .masked_lm_base import fresh_workers
from .policy_options import register_policy_task
from .sentence_items import sentence_blocking

logger = logging.getLogger(__name__)

#: ``--tlm-classify``: the copy of the task text the classification head reads
CLASSIFY = ("masked", "clean")


@dataclass
class TLMConfig(ClassificationMLMConfig):
    tlm_external_data: str = option("", "fairseq-preprocess output directory of the retrieved documents (its train "
                                    "split, binarized with the task's input0/dict.txt; side information of "
                                    "--mask-policy beside it); needed when --tlm-external-ratio > 0")
    tlm_external_ratio: int = option(999, "rho1: how many external batches per task batch, read by --tlm-ratio-rule "
                                     "(paper: rho1 external per task batch, a task batch when (step + 1) mod "
                                     "(rho1 + 1) = 0; authors: a task batch when (step + 1) mod rho1 = 0, rho1 - 1 "
                                     "external per task batch); 0: task batches only (stage 2)", range="[0, inf)",
                                     source="authors' code (stage 1's 999; read by the paper's rule it is one "
                                     "external batch more per task batch than theirs)")
    tlm_ratio_rule: ChoiceEnum(list(RATIO_RULES)) = option(
        "paper", "how --tlm-external-ratio is read: paper (rho1 external batches per task batch, Sec. 3.2) or "
        "authors (their trainer's (step + 1) % ratio == 0: ratio - 1 external per task batch, task only for ratio "
        "<= 1)", source="paper (the stored TLM comparison ran it)")
    tlm_task_mlm_weight: float = option(20.0, "rho2: a task batch's loss is (rho2 * MLM + CE) / (rho2 + 1) (authors' "
                                        "stage 1: 20); 0: classification only, on the clean text (stage 2)",
                                        range="[0, inf)", source="authors' code (stage 1)")
    tlm_classify: ChoiceEnum(list(CLASSIFY)) = option(
        "masked", "which copy of the task text the classification head reads: masked (one forward feeds both heads, "
        "as the authors) or clean (the clean and the masked copy share one forward). Checkpoints saved with the "
        "old --tlm-classify-masked / --no-tlm-classify-masked load as masked / clean", source="authors' code")
    train_subset: str = II("dataset.train_subset")


@register_policy_task("tlm", dataclass=TLMConfig)
class TLMTask(ClassificationMLMTask):
    """Joint task + MLM training on the task data and retrieved documents (TLM).

    Data: ``--data`` in the sentence_prediction layout (``input0/``, ``label/``) as for
    ``joint_mlm_classification``; ``--tlm-external-data`` a fairseq-preprocess directory of
    the retrieved documents (one document per line; each item is ``<s>`` + the document,
    cut to ``--tokens-per-sample``, as the authors truncate). Use with ``--criterion tlm``.
    """

    cfg: TLMConfig
    criteria = ("tlm",)
    #: options of joint_mlm_classification that users bring to TLM, and why TLM has none of them
    refused_options = {
        "--loss-weighting": "TLM weighs a task batch's losses by --tlm-task-mlm-weight; META-TARTAN is not offered "
                            "here: its meta step compares every objective's gradient on one batch, and TLM's "
                            "external batches carry only the MLM objective",
        "--mlm-weight": "the task batch's MLM weight is --tlm-task-mlm-weight",
    }

    def __init__(self, cfg, dictionary, label_dictionary):
        #: external batches per task batch, whichever rule read --tlm-external-ratio (:func:`paper_ratio`)
        self.external_ratio = paper_ratio(cfg.tlm_external_ratio, str(cfg.tlm_ratio_rule))
        if self.external_ratio > 0 and not cfg.tlm_external_data:
            raise ValueError(f"--tlm-external-ratio {cfg.tlm_external_ratio} needs --tlm-external-data (the "
                             f"binarized retrieved documents); --tlm-external-ratio 0 trains on the task only")
        if self.external_ratio == 0 and cfg.tlm_external_data:
            raise ValueError(f"--tlm-external-data is not read with --tlm-external-ratio {cfg.tlm_external_ratio} "
                             f"under --tlm-ratio-rule {cfg.tlm_ratio_rule} (task batches only); leave it out")
        super().__init__(cfg, dictionary, label_dictionary)
        check_hydra_path(cfg.tlm_external_data, "task.tlm_external_data")

    def build_weighting(self):
        """A task batch's ``(ρ2 · L_mlm + L_cls) / (ρ2 + 1)``, as the authors' ``model.py`` computes it."""
        rho2 = self.cfg.tlm_task_mlm_weight
        return FixedWeights({"mlm": rho2, "cls": 1.0}, total=rho2 + 1.0)

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        super().load_dataset(split, epoch, combine, **kwargs)
        if split == self.cfg.train_subset and self.external_ratio > 0:
            external = self._external_items(epoch, combine)
            self.datasets[split] = TwoSourceDataset(self.datasets[split], external)
            logger.info("%s: %d task items + %d external items from %s", split, self.datasets[split].offset,
                        len(external), self.cfg.tlm_external_data)

    def _external_items(self, epoch, combine):
        """The retrieved documents as MLM items (policy-masked like the task texts)."""
        data = self.cfg.tlm_external_data
        self._check_external_dictionary(data)
        blocking = sentence_blocking(data, self.cfg.tokens_per_sample, self.cfg.seed,
                                     self.cfg.side_info_without_fingerprint,
                                     self.cfg.verify_data)
        tokens, side_info = load_blocked_split(blocking, "train", self.dictionary, self.side_info_rules, epoch,
                                               combine, framing=self.framing_tokens)
        return NestedDictionaryDataset(
            {
                "id": IdDataset(),
                "mlm": self.mlm_inputs(tokens, side_info),
                "nsentences": NumSamplesDataset(),
                "ntokens": NumelDataset(tokens, reduce=True),
            },
            sizes=[tokens.sizes],
        )

    def _check_external_dictionary(self, data: str) -> None:
        """Refuse retrieved documents binarized with another dictionary than the task's."""
        theirs = load_dictionary(data, "--tlm-external-data")
        ours = self.dictionary.symbols[:-1]  # without the <mask> the task appended
        if theirs.symbols != ours:
            at = next((i for i, (a, b) in enumerate(zip(theirs.symbols, ours)) if a != b), min(len(theirs), len(ours)))
            line = at - theirs.nspecial + 1
            raise ValueError(f"{data}/dict.txt is not the task's {self.cfg.data}/input0/dict.txt (they differ at "
                             f"line {line} of dict.txt): binarize the retrieved documents with fairseq-preprocess "
                             f"--srcdict {self.cfg.data}/input0/dict.txt")

    def get_batch_iterator(self, dataset, max_tokens=None, max_sentences=None, max_positions=None,
                           ignore_invalid_inputs=False, required_batch_size_multiple=1, seed=1, num_shards=1,
                           shard_id=0, num_workers=0, epoch=1, data_buffer_size=0, disable_iterator_cache=False,
                           skip_remainder_batch=False, grouped_shuffling=False, update_epoch_batch_itr=False):
        """Training data: the TLM schedule (task and external batches, the same kind on every
        worker at each step); other splits: fairseq's iterator."""
        if not isinstance(dataset, TwoSourceDataset):
            return super().get_batch_iterator(
                dataset, max_tokens, max_sentences, max_positions, ignore_invalid_inputs,
                required_batch_size_multiple, seed, num_shards, shard_id, num_workers, epoch, data_buffer_size,
                disable_iterator_cache, skip_remainder_batch, grouped_shuffling, update_epoch_batch_itr)
        dataset.set_epoch(epoch)

        def source_batches(source, epoch_, cycle):
            indices = dataset.part_indices(source)
            order = np.random.default_rng((self.cfg.seed, epoch_, source, cycle)).permutation(len(indices))
            part = dataset.parts[source]
            batches = part.batch_by_size(order.astype(np.int64), max_tokens=max_tokens, max_sentences=max_sentences,
                                         required_batch_size_multiple=required_batch_size_multiple)
            return [list(indices[b]) for b in batches]

        def make_batches(dataset_, epoch_):
            batches, kinds = schedule(lambda c: source_batches(TASK, epoch_, c),
                                      lambda c: source_batches(EXTERNAL, epoch_, c),
                                      self.external_ratio, num_shards)
            logger.info("epoch %d: %d steps, %d task and %d external batches per worker", epoch_, len(kinds),
                        int((kinds == TASK).sum()), int((kinds == EXTERNAL).sum()))
            return batches

        return fresh_workers(ScheduledBatchIterator(
            dataset=dataset, collate_fn=dataset.collater, batch_sampler=make_batches, seed=seed,
            num_shards=num_shards, shard_id=shard_id, num_workers=num_workers, epoch=epoch,
            buffer_size=data_buffer_size, skip_remainder_batch=False, grouped_shuffling=False,
            reuse_dataloader=getattr(self.cfg, "reuse_dataloader", True),
            persistent_workers=getattr(self.cfg, "persistent_workers", True)))


class ScheduledBatchIterator(iterators.EpochBatchIterator):
    """fairseq's epoch iterator, except that it never shuffles the batch list: the TLM
    schedule fixes which step (and worker) takes which batch."""

    def ordered_batches(self, epoch, fix_batches_to_gpus, shuffle):
        return super().ordered_batches(epoch, fix_batches_to_gpus, shuffle=False)

"""The guided_mlm task's datasets, built through fairseq's own flag parsing."""

import numpy as np
import pytest
import torch

import fairseq_maskplug.plugin  # noqa: F401  (registers the tasks with fairseq)
from fairseq import options, tasks
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq_maskplug.data import load_blocked_split
from stats_helpers import assert_proportion

SOURCE = "source"  # an item's masked tokens (the batch's net_input.src_tokens)


def make_task(data, *flags):
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [str(data), "--task", "guided_mlm", "--arch", "roberta_base",
                                                "--tokens-per-sample", "32", *map(str, flags)])
    return tasks.setup_task(convert_namespace_to_omegaconf(args).task)


def items(task, split="train", epoch=1):
    task.load_dataset(split)
    ds = task.dataset(split)
    ds.set_epoch(epoch)
    return [ds[i] for i in range(len(ds))]


@pytest.mark.parametrize("policy", ["random", "span"])
def test_a_batch_carries_its_items_mask_counts_as_the_batch_shows_them(tiny_data, policy):
    """Items carry (chosen, maskable) per row, and the same as units (each token a unit); the logged
    statistics read them from the batch. They agree with what the batch itself shows: non-pad targets,
    and inputs other than <s>, </s> and pad."""
    task = make_task(tiny_data / "bin", "--mask-policy", policy)
    task.load_dataset("train")
    dataset, d = task.dataset("train"), task.source_dictionary
    batch = dataset.collater([dataset[i] for i in range(min(16, len(dataset)))])
    src, target = batch["net_input"]["src_tokens"], batch["target"]
    maskable = (src.ne(d.pad()) & src.ne(d.bos()) & src.ne(d.eos())).sum(dim=1)
    chosen = target.ne(d.pad()).sum(dim=1)
    assert batch["mask_counts"].tolist() == torch.stack([chosen, maskable, chosen, maskable], dim=1).tolist()
    chosen, counted, _, _ = task.mask_counts(batch)
    assert int(chosen.sum()) > 0 and torch.equal(counted, maskable)


def test_a_policy_task_must_build_its_policy_through_the_shared_base():
    from fairseq.tasks import TASK_REGISTRY, FairseqTask
    from fairseq_maskplug.tasks import MaskedLMBaseTask, register_policy_task

    with pytest.raises(TypeError, match=r"register_policy_task\('no_policy_base'\): Plain must derive from "
                                        r"fairseq_maskplug.tasks.MaskedLMBaseTask"):
        register_policy_task("no_policy_base", dataclass=object)(type("Plain", (FairseqTask,), {}))
    assert "no_policy_base" not in TASK_REGISTRY
    assert all(issubclass(TASK_REGISTRY[name], MaskedLMBaseTask)
               for name in ("guided_mlm", "selective_mlm", "fe_mlm", "guided_denoising", "joint_mlm_classification",
                            "tlm"))


def test_policy_options_become_task_flags(tiny_data):
    task = make_task(tiny_data / "bin", "--mask-prob", "0.3", "--seed", "4")
    assert task.cfg.mask_prob == 0.3 and task.cfg.mask_policy == "random" and task.cfg.seed == 4


def test_unknown_policy_is_rejected(tiny_data):
    with pytest.raises(ValueError, match="unknown mask policy 'nope'.*--user-dir"):
        make_task(tiny_data / "bin", "--mask-policy", "nope")


def test_same_seed_same_masks_new_epoch_new_masks(tiny_data):
    first = items(make_task(tiny_data / "bin", "--seed", "7"))
    again = items(make_task(tiny_data / "bin", "--seed", "7"))
    for a, b in zip(first, again):
        assert torch.equal(a[SOURCE], b[SOURCE])
        assert torch.equal(a["target"], b["target"])
    epoch2 = items(make_task(tiny_data / "bin", "--seed", "7"), epoch=2)
    other_seed = items(make_task(tiny_data / "bin", "--seed", "8"))
    changed = [not torch.equal(a["target"], b["target"]) for a, b in zip(first, epoch2)]
    assert np.mean(changed) > 0.9, "masks should be redrawn every epoch"
    assert np.mean([not torch.equal(a["target"], b["target"]) for a, b in zip(first, other_seed)]) > 0.9


def test_items_agree_with_the_original_blocks_and_rates_hold(tiny_data):
    task = make_task(tiny_data / "bin", "--mask-prob", "0.2")
    d = task.source_dictionary
    originals, _ = load_blocked_split(task.cfg, "train", d)
    chosen = maskable = as_mask = 0
    for epoch in range(1, 6):
        for i, item in enumerate(items(task, epoch=epoch)):
            source, target, original = item[SOURCE], item["target"], originals[i]
            picked = target.ne(d.pad())
            special = (original == d.bos()) | (original == d.eos())
            assert not (picked & special).any()
            assert torch.equal(source[~picked], original[~picked]), "unchosen positions changed"
            assert torch.equal(target[picked], original[picked]), "targets are not the originals"
            assert (source[picked] >= d.nspecial).all(), "a chosen position became a special token"
            chosen += int(picked.sum())
            maskable += int((~special).sum())
            as_mask += int((source[picked] == task.mask_idx).sum())
    # Positions are drawn count-wise per block (a sum of hypergeometric draws), whose
    # variance is below the binomial one this tolerance assumes.
    assert_proportion(chosen, maskable, 0.2, "realised mask rate over 5 epochs")
    assert_proportion(as_mask, chosen, 0.8, "share of chosen positions shown as <mask>")


def test_epoch_iterator_is_reused_and_masks_still_change(tiny_data):
    """Batch shapes do not change between epochs, so fairseq keeps one epoch iterator (as
    for its MaskTokensDataset); set_epoch still gives every epoch new masks."""
    task = make_task(tiny_data / "bin", "--seed", "3")
    task.load_dataset("train")
    dataset = task.dataset("train")
    assert dataset.can_reuse_epoch_itr_across_epochs

    def epoch_targets(epoch):
        itr = task.get_batch_iterator(dataset, max_sentences=16, seed=3, epoch=epoch)
        return itr, [b["target"] for b in itr.next_epoch_itr(shuffle=False)]

    first_itr, first = epoch_targets(1)
    second_itr, second = epoch_targets(2)
    assert second_itr is first_itr
    assert [t.shape for t in first] == [t.shape for t in second]
    assert np.mean([not torch.equal(a, b) for a, b in zip(first, second)]) > 0.9


@pytest.mark.parametrize("policy", ["random", "span"])
def test_masks_change_every_epoch_with_loader_workers_as_in_process(tiny_data, policy):
    """fairseq's default --num-workers 1 keeps its worker from epoch to epoch with the dataset copy it
    started with: without fresh workers each epoch, epochs 2 and 3 repeated epoch 1's masks."""
    task = make_task(tiny_data / "bin", "--mask-policy", policy)
    task.load_dataset("valid")

    def first_targets(workers):
        itr = task.get_batch_iterator(task.dataset("valid"), max_sentences=8, seed=1, num_workers=workers,
                                      disable_iterator_cache=True)
        targets = []
        for _ in range(3):
            epoch = itr.next_epoch_itr(shuffle=False)
            targets.append([batch["target"].tolist() for batch in epoch])
        return targets

    in_process, with_worker = first_targets(0), first_targets(1)
    assert in_process[0] != in_process[1] != in_process[2]
    assert with_worker == in_process

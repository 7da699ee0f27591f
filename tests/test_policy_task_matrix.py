"""The README's policies x tasks matrix, cell by cell: every built-in policy builds in every task that
takes ``--mask-policy``, loads its side information with the tokens and masks items (``mask_counts``
carried by the items); ``fe_mlm`` takes the policies that define views and refuses the others."""

import shutil

import numpy as np
import pytest
from fairseq import options, tasks
from fairseq.data import Dictionary, data_utils
from fairseq.dataclass.utils import convert_namespace_to_omegaconf

from fairseq_maskplug.data import write_side_info
from fairseq_maskplug.masking import MASK_POLICY_REGISTRY
from fairseq_maskplug.masking.salient import span_ids
from test_finetune_e2e import write_task

POLICIES = {"random", "span", "l3", "selective", "matched_random", "salient_span", "learned_span", "pmi"}
WITH_VIEWS = {"random", "span", "l3", "pmi"}


def write_tracks(directory, rng):
    """Every built-in policy's tracks for the train and valid splits of ``directory``."""
    dictionary = Dictionary.load(str(directory / "dict.txt"))
    for split in ("train", "valid"):
        tokens = data_utils.load_indexed_dataset(str(directory / split), dictionary)
        sizes = np.array(tokens.sizes)  # a copy, taken while the dataset (its memory map) lives
        spans = [span_ids(n, [(1, 3)] if n > 4 else []) for n in sizes]  # one two-token salient span a line
        tracks = {"plt": ([rng.uniform(0.01, 1.0, n) for n in sizes], "float64"),
                  "importance": ([rng.random(n) for n in sizes], "float64"),
                  "salient_spans": (spans, "int64"),
                  "span_start": ([rng.normal(size=n) for n in sizes], "float64"),
                  "span_end": ([rng.normal(size=n) for n in sizes], "float64"),
                  "pmi_units": ([np.append((rng.random(n - 1) < 0.6) | (np.arange(n - 1) == 0), 0) for n in sizes],
                                "uint8")}
        for name, (rows, dtype) in tracks.items():
            write_side_info(str(directory / f"{split}.{name}"), rows, dtype, tokens_prefix=str(directory / split))


@pytest.fixture(scope="module")
def matrix_data(tiny_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("matrix")
    classification = write_task(tiny_data, root)
    mlm = shutil.copytree(tiny_data / "bin", root / "mlm")
    rng = np.random.default_rng(0)
    write_tracks(mlm, rng)
    write_tracks(classification / "input0", rng)
    return {"mlm": mlm, "classification": classification}


TASKS = {"guided_mlm": ("mlm", ["--arch", "roberta_base"]),
         "selective_mlm": ("mlm", ["--arch", "roberta_base"]),
         "guided_denoising": ("mlm", ["--arch", "bart_tiny"]),
         "joint_mlm_classification": ("classification", ["--arch", "roberta_base", "--num-classes", "2"]),
         "fe_mlm": ("mlm", ["--arch", "roberta_base", "--fe-views", "3"])}


def build(matrix_data, task, policy, *unit):
    kind, extra = TASKS[task]
    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(matrix_data[kind]), "--task", task, "--tokens-per-sample", "32", "--mask-policy", policy,
        *(["--l3-max-prob", "0.3"] if policy == "l3" and task == "fe_mlm" else []), *extra, *unit])
    return tasks.setup_task(convert_namespace_to_omegaconf(args).task)


def test_the_matrix_covers_every_built_in_policy():
    assert POLICIES == set(MASK_POLICY_REGISTRY)


@pytest.mark.parametrize("unit", ["token", "word"])
@pytest.mark.parametrize("task", [t for t in TASKS if t != "fe_mlm"])
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_every_policy_masks_items_in_every_policy_task(matrix_data, task, policy, unit):
    """(Words of this whitespace data are its tokens; tests/test_words.py checks words of several pieces.)"""
    built = build(matrix_data, task, policy, "--mask-unit", unit)
    built.load_dataset("valid")
    dataset = built.dataset("valid")
    batch = dataset.collater([dataset[i] for i in range(len(dataset))])
    counts = batch["mlm"]["mask_counts"] if "mlm" in batch else batch["mask_counts"]
    chosen, maskable = counts[:, 0], counts[:, 1]
    assert int(chosen.sum()) > 0 and bool((chosen <= maskable).all()), (task, policy)


@pytest.mark.parametrize("unit", ["token", "word"])
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_fe_mlm_takes_the_policies_with_views_and_refuses_the_others(matrix_data, policy, unit):
    if policy not in WITH_VIEWS:
        with pytest.raises(ValueError, match=policy):
            build(matrix_data, "fe_mlm", policy, "--mask-unit", unit).load_dataset("valid")
        return
    built = build(matrix_data, "fe_mlm", policy, "--mask-unit", unit)
    built.load_dataset("valid")
    dataset = built.dataset("valid")
    batch = dataset.collater([dataset[i] for i in range(len(dataset))])
    assert batch["mask_counts"].shape[0] == 3 * len(dataset) and int(batch["mask_counts"][:, 0].sum()) > 0

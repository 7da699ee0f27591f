"""--fp16/--bf16 of the scoring commands: autocast really runs (the scores change), they stay within
half precision's rounding of the fp32 scores, and a format the machine cannot run is refused in one line
before any work."""

import shutil

import numpy as np
import pytest
import torch

from fairseq_helpers import BIN, check, one_line_error, run, train

pytestmark = pytest.mark.e2e

#: bf16 keeps 8 significant bits: unit roundoff u = 2^-8
BF16_UNIT_ROUNDOFF = 2.0 ** -8
#: matrix-product stages on the way to a logit of the tiny model: 2 layers x (attention, feed-forward), the LM head
ROUNDED_STAGES = 5


def log_plt_tolerance(largest_logit: float) -> float:
    """Tolerance on |log PLT(bf16) - log PLT(fp32)|, a first-order estimate, not a proven bound: autocast rounds
    each stage's output to bf16, at most u relative each, so a logit moves by at most stages x u x its size, and
    log p = z_t - logsumexp(z) by at most twice the largest move."""
    return 2 * ROUNDED_STAGES * BF16_UNIT_ROUNDOFF * largest_logit


def largest_logit(checkpoint, data) -> float:
    """max |logit| of the fp32 model over the valid split, every token visible."""
    from fairseq import checkpoint_utils
    from fairseq.data import data_utils

    models, _, task = checkpoint_utils.load_model_ensemble_and_task([str(checkpoint)])
    model, d = models[0].eval(), task.source_dictionary
    lines = data_utils.load_indexed_dataset(str(data / "valid"), d)
    with torch.inference_mode():
        return max(float(model(torch.cat([torch.tensor([d.bos()]), lines[i]])[None])[0].abs().max())
                   for i in range(len(lines)))


@pytest.fixture(scope="module")
def model(tiny_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("precision")
    check(train(tiny_data / "bin", root / "ck", "--max-epoch", "1"))
    return root / "ck" / "checkpoint_last.pt", tiny_data / "bin"


def plts(checkpoint, data, name, *extra):
    check(run([BIN / "fairseq-maskplug-score-pll", "--checkpoint", checkpoint, "--data", data, "--splits", "valid",
               "--word-starts", "token", "--name", name, *extra]))
    return np.fromfile(data / f"valid.{name}.bin", dtype=np.float64)


@pytest.mark.skipif(not torch.amp.is_autocast_available("cpu"), reason="this torch has no bf16 autocast on CPU")
def test_bf16_scores_are_within_its_rounding_of_fp32(model, tmp_path):
    checkpoint, tokens = model
    data = shutil.copytree(tokens, tmp_path / "data")
    fp32, bf16 = plts(checkpoint, data, "fp32"), plts(checkpoint, data, "bf16", "--bf16")
    scored = fp32 < 1  # </s> is 1 in both
    assert np.array_equal(fp32 == 1, bf16 == 1) and scored.sum() > 300
    assert not np.array_equal(fp32, bf16)  # autocast ran
    difference = np.abs(np.log(bf16[scored]) - np.log(fp32[scored]))
    tolerance = log_plt_tolerance(largest_logit(checkpoint, data))  # this model: about 0.02; measured: 0.002
    assert difference.max() <= tolerance, (difference.max(), tolerance)


def test_two_formats_at_once_are_refused_by_the_parser(tmp_path):
    result = run([BIN / "fairseq-maskplug-score-pll", "--checkpoint", tmp_path / "c.pt", "--data", tmp_path,
                  "--fp16", "--bf16"])
    assert result.returncode == 2 and "not allowed with argument" in result.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA GPU runs --fp16")
@pytest.mark.parametrize("command, data", [("score-pll", "bin"), ("annotate-importance", "bin"),
                                           ("score-spans", "bin"), ("score-importance", "classification")])
def test_fp16_without_a_gpu_is_one_line_before_the_model_loads(tiny_data, tmp_path, command, data):
    root = shutil.copytree(tiny_data / "bin", tmp_path / "input0")
    if data == "classification":
        shutil.copytree(root, tmp_path / "label")  # a label/ beside input0/: the layout is all it checks first
        root = tmp_path
    result = run([BIN / f"fairseq-maskplug-{command}", "--checkpoint", tmp_path / "not-read.pt", "--data", root,
                  "--splits", "valid", "--fp16"])
    one_line_error(result, "--fp16 needs a CUDA GPU and none is visible")

"""fairseq-maskplug-probe-features (issue 100's diagnosis): the mean pairwise cosine against a direct computation, the
linear probe on separable and on label-free data, and the command on a real general model against fresh weights."""

import json

import numpy as np
import pytest
import torch

from fairseq_helpers import BIN, CPU_RUN, TINY_ROBERTA, check, run, w0_task
from fairseq_maskplug.evaluation.feature_probe import linear_probe, mean_pairwise_cosine

pytestmark = pytest.mark.e2e


def test_mean_pairwise_cosine_is_the_mean_over_pairs():
    x = torch.randn(30, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64) + 0.5
    u = x / x.norm(dim=1, keepdim=True)
    direct = np.mean([float(u[i] @ u[j]) for i in range(30) for j in range(30) if i != j])
    assert mean_pairwise_cosine(x) == pytest.approx(direct, abs=1e-12)
    assert mean_pairwise_cosine(torch.ones(5, 3)) == pytest.approx(1.0)
    assert mean_pairwise_cosine(torch.eye(4)) == pytest.approx(0.0, abs=1e-15)
    for bad in (torch.ones(1, 3), torch.zeros(3, 2), torch.tensor([[1.0, float("nan")], [1.0, 0.0]])):
        with pytest.raises(ValueError):
            mean_pairwise_cosine(bad)


def test_the_probe_reads_a_separable_label_and_not_a_random_one():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(600, 10))
    y = (x[:, 3] - 0.5 * x[:, 7] > 0).astype(int)
    predicted = linear_probe(x[:400], y[:400], x[400:])
    assert (predicted == y[400:]).mean() > 0.95
    noise = rng.integers(0, 2, 600)
    accuracy = (linear_probe(x[:400], noise[:400], x[400:]) == noise[400:]).mean()
    # 200 test labels independent of everything: the accuracy is Binomial(200, 1/2) / 200, whose sd is 0.035;
    # 4.5 sd either side fails once in about 150,000 draws
    assert abs(accuracy - 0.5) < 4.5 * 0.0354
    three = np.repeat([0, 1, 2], 50)
    centres = rng.normal(scale=4, size=(3, 10))
    points = centres[three] + rng.normal(size=(150, 10))
    assert (linear_probe(points, three, points) == three).mean() > 0.95  # several classes
    with pytest.raises(ValueError):
        linear_probe(x[:10], y[:9], x[:5])


@pytest.fixture(scope="module")
def general(tmp_path_factory):
    """A corpus, a labelled task (label: whether the line holds w0) and a general model trained 20 updates."""
    root = w0_task(tmp_path_factory.mktemp("probe"), (("train", 200, 1), ("valid", 40, 2), ("test", 60, 3)))
    check(run([BIN / "fairseq-maskplug-train", root / "corpus", "--task", "guided_mlm", "--tokens-per-sample", "32",
               "--save-dir", root / "general", "--max-update", "20", *TINY_ROBERTA, *CPU_RUN]))
    return root


def test_the_command_scores_a_general_model_and_fresh_weights_of_its_shape(general):
    def probe(*extra):
        result = run([BIN / "fairseq-maskplug-probe-features", "--checkpoint", general / "general" / "checkpoint_last.pt",
                      "--data", general / "task", "--split", "train,test", *extra])
        check(result)
        return json.loads(result.stdout.strip().splitlines()[-1])

    trained, fresh, fresh_again = probe(), probe("--random-init", "--seed", "3"), probe("--random-init", "--seed", "3")
    assert fresh == fresh_again and fresh["random_init"] and not trained["random_init"]
    assert trained["test"]["n"] == 60 and "probe_accuracy_cls" not in trained["train"]
    for scores in (trained, fresh):
        assert -1 <= scores["embedding_cosine"] <= 1
        assert 0 <= scores["test"]["probe_accuracy_mean"] <= 100 and 0 <= scores["test"]["probe_accuracy_cls"] <= 100
    # fresh embeddings: 44 rows of dim 32 drawn independently, the mean cosine over 946 pairs has sd near
    # 1 / (sqrt(32) * sqrt(946)) = 0.006: 0.05 is 8 sd
    assert abs(fresh["embedding_cosine"]) < 0.05
    assert trained["embedding_cosine"] != fresh["embedding_cosine"]


def test_the_command_refuses_a_classifier_and_a_missing_checkpoint(general, tmp_path):
    result = run([BIN / "fairseq-maskplug-probe-features", "--checkpoint", tmp_path / "none.pt", "--data",
                  general / "task"])
    assert result.returncode == 2 and "checkpoint not found" in result.stderr

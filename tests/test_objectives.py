"""The objective-weighting component (weighting/objectives.py): one component serves the joint
task (fixed weights, META-TARTAN) and TLM (ρ2), with the very arithmetic each used before."""

import pytest
import torch

from fairseq_maskplug.commands.train_help import training_help
from fairseq_maskplug.weighting import FixedWeights, MetaTartanTraining, combine


def losses(seed):
    g = torch.Generator().manual_seed(seed)
    return {"cls": torch.rand(3, generator=g) * 5, "mlm": torch.rand(3, generator=g) * 9}


@pytest.mark.parametrize("seed", range(20))
def test_combined_losses_are_bitwise_the_formulas_the_tasks_used_before(seed):
    loss = losses(seed)
    for rho2 in (20.0, 3.0, 0.0, 0.37):  # tlm: (ρ2 · L_mlm + L_cls) / (ρ2 + 1)
        tlm = FixedWeights({"mlm": rho2, "cls": 1.0}, total=rho2 + 1.0)
        assert torch.equal(combine(loss, tlm.weights(), tlm.total), (rho2 * loss["mlm"] + loss["cls"]) / (rho2 + 1.0))
    for w in (1.0, 0.0, 0.3):  # joint, fixed: L_cls + w · L_mlm
        joint = FixedWeights({"cls": 1.0, "mlm": w})
        assert torch.equal(combine(loss, joint.weights(), joint.total), 1.0 * loss["cls"] + w * loss["mlm"])


def test_meta_tartan_is_a_weighting_of_the_same_shape():
    tartan = MetaTartanTraining(("cls", "mlm"), seed=1, meta_lr=0.01, head_steps=1, head_lr=1e-3,
                                head_weight_decay=0.0)
    assert tartan.total == 1.0 and callable(tartan.weights)


def test_fixed_weights_refuse_what_is_not_a_weighting():
    with pytest.raises(ValueError, match="non-negative"):
        FixedWeights({"cls": 1.0, "mlm": -1.0})
    with pytest.raises(ValueError, match="total positive"):
        FixedWeights({"cls": 1.0}, total=0.0)
    with pytest.raises(KeyError, match="no loss for the objectives \\['mlm'\\]"):
        combine({"cls": torch.ones(1)}, {"cls": 1.0, "mlm": 2.0})


def test_tlm_help_lists_only_what_tlm_reads():
    text = training_help(["--task", "tlm"])
    assert "  --tlm-task-mlm-weight " in text and "  --num-classes " in text and "  --mask-policy " in text
    for flag in ("--mlm-weight ", "--loss-weighting ", "--tartan-meta-lr ", "--tartan-dev-subset "):
        assert f"  {flag}" not in text, f"{flag}in --task tlm --help"
    joint = training_help(["--task", "joint_mlm_classification"])
    assert "  --mlm-weight " in joint and "  --tartan-meta-lr " in joint and "--tlm-" not in joint

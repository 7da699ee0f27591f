"""``--layernorm-eps`` for fairseq's ``roberta`` models: the epsilon of every LayerNorm of the model.

fairseq builds each LayerNorm of RoBERTa (the embedding's, the two of every layer, the LM head's) with its fixed
``eps=1e-5`` (``fairseq.modules.LayerNorm``); Hugging Face's ``RobertaConfig`` carries ``layer_norm_eps`` and
defaults it to ``1e-12``, so a RoBERTa built the usual HF way (``RobertaConfig()``) could not be converted: a
LayerNorm's output depends on its epsilon wherever a row's variance is small, as it is at initialisation
(embeddings of standard deviation 0.02: variance 4e-4, against which 1e-5 is 2.5%). The option, added to
fairseq's own ``roberta`` model (no forked architecture), sets the epsilon after fairseq builds the model;
unset, fairseq's 1e-5 stands and nothing changes. It is saved with the model's options, so a release written by
``fairseq-maskplug-convert --from-hf`` keeps it, and ``release.model_options`` hands it to the recipes'
``fairseq-train`` (``PRETRAINED=DIR``). Range: :data:`EPS_RANGE`; default: fairseq's 1e-5.
"""

import torch

from ..common.option_ranges import Interval, number

#: the epsilons accepted (ours: positive, and at most 0.1, far above any model's: 1e-5 fairseq, 1e-12 HF, 1e-6 T5)
EPS_RANGE = "(0, 0.1]"


def set_layer_norm_eps(model: torch.nn.Module, eps: float) -> int:
    """Give every ``torch.nn.LayerNorm`` of ``model`` the epsilon ``eps``; how many there were."""
    if eps not in Interval.parse(EPS_RANGE):
        raise ValueError(f"--layernorm-eps must lie in {Interval.parse(EPS_RANGE)}, got {eps}")
    count = 0
    for module in model.modules():
        if isinstance(module, torch.nn.LayerNorm):
            module.eps = float(eps)
            count += 1
    return count


def install() -> None:
    """Add ``--layernorm-eps`` to fairseq's ``roberta`` model (idempotent)."""
    from fairseq.models.roberta.model import RobertaModel

    if hasattr(RobertaModel.add_args, "maskplug_original"):
        return
    add_args, build_model = RobertaModel.add_args, RobertaModel.build_model.__func__

    def add_args_with_eps(parser):
        add_args(parser)
        parser.add_argument("--layernorm-eps", type=number(EPS_RANGE), default=None, metavar="EPS",
                            help=f"epsilon of every LayerNorm, in {EPS_RANGE}; unset: fairseq's 1e-5. "
                                 "Hugging Face's RobertaConfig defaults layer_norm_eps to 1e-12: "
                                 "fairseq-maskplug-convert --from-hf sets it from there")

    def build_model_with_eps(cls, args, task):
        model = build_model(cls, args, task)
        eps = getattr(args, "layernorm_eps", None)
        if eps is not None:
            set_layer_norm_eps(model, eps)
        return model

    add_args_with_eps.maskplug_original = add_args
    RobertaModel.add_args = staticmethod(add_args_with_eps)
    RobertaModel.build_model = classmethod(build_model_with_eps)

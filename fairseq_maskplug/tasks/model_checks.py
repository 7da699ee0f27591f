"""What every package task checks of the model it builds, before any data is read: the kind of
model it trains and room for its longest item.

fairseq builds whatever ``--arch`` names: a RoBERTa encoder under ``guided_denoising`` failed only
at the first batch ("Expected input batch_size ... to match target batch_size"), a BART under
``span_policy`` with a TypeError, and ``--tokens-per-sample`` above the model's positions with
"Size of sample #0 is invalid" after the datasets were loaded.
"""

from fairseq.models import FairseqEncoderDecoderModel


def check_model(task, model, arch: str, encoder_decoder: bool) -> None:
    """Refuse ``model`` (built from ``--arch arch``) unless it is an encoder-decoder exactly when
    ``encoder_decoder``, and unless it has at least ``--tokens-per-sample`` positions."""
    name = getattr(task.cfg, "_name", None) or type(task).__name__
    if isinstance(model, FairseqEncoderDecoderModel) != encoder_decoder:
        wanted = ("an encoder-decoder model (--arch bart_tiny, bart_base, bart_large)" if encoder_decoder else
                  "an encoder (--arch roberta_tiny, roberta_base, roberta_large)")
        kind = "an encoder-decoder" if isinstance(model, FairseqEncoderDecoderModel) else "an encoder"
        raise ValueError(f"--task {name} trains {wanted}; --arch {arch} is {kind}")
    positions = model.max_positions()
    positions = min(positions) if isinstance(positions, tuple) else positions
    tokens = getattr(task.cfg, "tokens_per_sample", None)
    if tokens is not None and positions is not None and tokens > positions:
        raise ValueError(f"--tokens-per-sample {tokens} exceeds the {positions} positions of --arch {arch}: lower "
                         "--tokens-per-sample or raise the model's positions (--max-positions, or "
                         "--max-source-positions/--max-target-positions for BART)")

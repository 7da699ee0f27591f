"""What the criteria's ``reduce_metrics`` share: sums over the logging outputs of all batches and
workers, and losses logged as fairseq logs them (the mean in bits, base 2)."""

import math

from fairseq.logging import metrics


def summed(logging_outputs):
    """``total(key)``: the sum of ``key`` over ``logging_outputs`` (0 where a batch lacks it)."""
    return lambda key: sum(log.get(key, 0) for log in logging_outputs)


def log_bits(name: str, nats: float, count: float, round: int = 3) -> None:
    """Log ``nats / count`` (a summed loss in nats over ``count`` items) in bits, weighted by
    ``count``; nothing when ``count`` is 0."""
    if count:
        metrics.log_scalar(name, nats / count / math.log(2), count, round=round)

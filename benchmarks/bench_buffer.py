"""Downstream Mask speed: the batched buffer scorer vs one sentence at a time, same model and sentences.

Default: a randomly initialised roberta of the quickstart's shape (4 layers, dim 128) with
a sentence classification head (seeded), on a synthetic Zipf corpus (5-40 tokens per sentence) with
random labels (speed does not depend on the weights; both runs must give identical
labels). ``--checkpoint CK --data DIR`` scores real data with a fine-tuned classifier
(sentence_prediction layout). Prints both speeds and last
``ratio=<batched / one-at-a-time sentences per second>`` (target >= 4).

    python benchmarks/bench_buffer.py [--sentences 200] [--checkpoint CK --data DIR --split valid] [--smoke]
"""

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # preprocess/
from smoke import benchmark_parser, shrink  # noqa: E402
from task_timing import make_data  # noqa: E402
from bench_pll import load_model  # noqa: E402


def synthetic(n):
    """Random-weight classifier, synthetic sentences and random labels."""
    import torch
    from fairseq.data import data_utils
    torch.manual_seed(0)  # the same random weights in every run
    with tempfile.TemporaryDirectory() as tmp:
        data = make_data(Path(tmp), lines=n)
        model, task = load_model(None, str(data))
        d = task.source_dictionary
        tokens = data_utils.load_indexed_dataset(str(Path(data) / "train"), d)
        sentences = [tokens[i].numpy()[:-1] for i in range(min(n, len(tokens)))]
    model.register_classification_head("sentence_classification_head", num_classes=2)
    labels = np.random.default_rng(0).integers(0, 2, len(sentences))
    return model, d, sentences, labels


def main():
    parser = benchmark_parser(__doc__)
    parser.add_argument("--checkpoint", help="sentence_prediction checkpoint (default: random weights)")
    parser.add_argument("--data", help="its sentence_prediction data directory")
    parser.add_argument("--split", default="valid")
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=256, help="sentences in flight")
    parser.add_argument("--max-tokens", type=int, default=2048, help="padded tokens per forward")
    parser.add_argument("--delta", type=float, default=0.05)
    args = shrink(parser.parse_args(), sentences=12)
    import torch
    from fairseq_maskplug.scoring.buffer import SentenceClassifier, buffer_importance

    if args.checkpoint:
        from fairseq_maskplug.scoring.loading import load_task_split
        model, d, tokens, classes = load_task_split(args.checkpoint, args.data, args.split,
                                                       "sentence_classification_head")
        n = min(args.sentences, len(tokens))
        sentences, labels = [tokens[i].numpy()[:-1][:model.max_positions() - 2] for i in range(n)], classes[:n]
    else:
        model, d, sentences, labels = synthetic(args.sentences)
    model.eval()
    runs = {}
    for name, batch_size in (("one at a time", 1), ("batched", args.batch_size)):
        classifier = SentenceClassifier(model, "sentence_classification_head", d.bos(), d.eos(), d.pad())
        start = time.perf_counter()
        importance, scored = buffer_importance(sentences, labels, classifier, args.delta, batch_size,
                                               args.max_tokens, progress=False)
        runs[name] = (time.perf_counter() - start, importance, scored, classifier.calls)
    (t_single, imp_single, sc_single, calls_single) = runs["one at a time"]
    (t_batched, imp_batched, sc_batched, calls_batched) = runs["batched"]
    identical = np.array_equal(sc_single, sc_batched) and all(
        np.array_equal(a, b) for a, b in zip(imp_single, imp_batched))
    n_tokens = sum(len(s) for s in sentences)
    print(f"{len(sentences)} sentences, {n_tokens} tokens, {sc_batched.sum()} classified correctly and scored, "
          f"{sum(int(m.sum()) for m in imp_batched)} tokens important, {torch.get_num_threads()} threads")
    print(f"one at a time: {t_single:7.2f} s  {len(sentences) / t_single:8.1f} sentences/s  {calls_single} forwards")
    print(f"batched ({args.batch_size}, max {args.max_tokens} tokens):  {t_batched:7.2f} s  {len(sentences) / t_batched:8.1f} sentences/s  "
          f"{calls_batched} forwards")
    print(f"identical labels: {identical}")
    if not identical:
        sys.exit("batched and one-at-a-time labels differ")
    print(f"ratio={t_single / t_batched:.2f}")


if __name__ == "__main__":
    main()

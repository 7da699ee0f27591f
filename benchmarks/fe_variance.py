"""Gradient-variance probe for fully-explored masking (Zheng et al., §3, Fig. 3, Eq. 11).

For a fixed minibatch (the first ``--batch`` blocks of a split) and a roberta MLM
checkpoint, with dropout off and every chosen position replaced by ``<mask>`` (so
that the only randomness is which positions are masked):

(a) covariance vs Hamming distance: pairs of masks ``(m1, m2)`` of ``tau`` tokens per
    sequence sharing ``o`` positions, ``H = 2 (tau - o)``; the covariance is
    ``E[(g(m1) - g_bar) . (g(m2) - g_bar)] / P`` over the ``P`` probed parameters, with
    ``g_bar`` the mean gradient over independent uniform masks. Saved as CSV and PNG.
(b) variance of the K-mask gradient ``(1/K) sum_k g(m_k)`` (Eq. 6) under FE masks
    (K disjoint) vs K independent uniform masks of the same size, each estimated as
    the sum over parameters of the sample variance over ``--sets`` draws.

With ``--mask-policy l3`` (ours: FE views of any policy, ``--task fe_mlm --mask-policy l3``),
(b) compares K disjoint views of the l3 policy (:func:`bernoulli_views`: each view has exactly
l3's distribution) with K independent l3 masks, from the ``--l3-track`` PLT track of the split
with ``--l3-mean`` and ``--l3-max-prob`` (at most 1/K); (a) is skipped (its pairs are uniform).

The model runs on CUDA when there is one (``--device``); the variances are kept as running moments
(Welford, float64, on the model's device), so that no gradient is stored: a roberta_base probe holds
a few vectors of the probed size, not hundreds. ``--seeds N`` repeats (b) on N minibatches (seed
``s`` takes the ``s``-th block of ``--batch`` sequences of the split, and its own masks) and reports
the ratio's mean and standard error over them; (a) runs on the first.

Last line: ``ratio=<var_fe / var_random>`` (expected below 1), with ``--seeds`` > 1 the mean over
seeds followed by ``stderr=`` and ``seeds=``.

    python benchmarks/fe_variance.py --checkpoint ck/checkpoint_last.pt --data data-bin \\
        --split valid --out results/fe_variance
    python benchmarks/fe_variance.py --checkpoint ... --mask-policy l3 --l3-max-prob 0.25   # l3 views
    python benchmarks/fe_variance.py --checkpoint ... --seeds 5    # five minibatches: mean ratio and its stderr
    python benchmarks/fe_variance.py --smoke [--mask-policy l3]   # tiny sizes on a 1-update tiny model
"""

import csv
import re
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent))
from commands import run_checked  # noqa: E402
from smoke import benchmark_parser, shrink  # noqa: E402
from task_timing import BIN, REPO, make_data  # noqa: E402


def load(checkpoint: str, data: str, split: str, batch: int, tokens_per_sample: int, track: str = None,
         offset: int = 0):
    """``(model, task, tokens, maskable, side)``: ``batch`` blocks from block ``offset`` on, right-padded,
    and the ``track`` side information blocked alike (None without a track)."""
    import fairseq_maskplug.plugin  # noqa: F401  (registers the tasks with fairseq)
    from fairseq import checkpoint_utils
    from fairseq_maskplug.data import load_blocked_split
    from fairseq_maskplug.masking.values import PROBABILITY

    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task([checkpoint], arg_overrides={"data": data})
    model = models[0].eval()  # dropout off; gradients still flow
    cfg.task.tokens_per_sample = tokens_per_sample
    cfg.task.sample_break_mode, cfg.task.shorten_method = "complete", "truncate"
    blocks, side = load_blocked_split(cfg.task, split, task.source_dictionary, {track: PROBABILITY} if track else {})
    d = task.source_dictionary
    if offset + batch > len(blocks):
        raise SystemExit(f"{split} has {len(blocks)} blocks of {tokens_per_sample} tokens: too few for minibatch "
                         f"{offset // batch + 1} of {batch} (fewer --seeds or a smaller --batch)")
    indices = range(offset, offset + batch)
    rows = [blocks[i] for i in indices]
    tokens = torch.full((len(rows), max(len(r) for r in rows)), d.pad(), dtype=torch.long)
    values = np.ones(tokens.shape) if track else None
    for i, (r, index) in enumerate(zip(rows, indices)):
        tokens[i, :len(r)] = r
        if track:
            values[i, :len(r)] = side[track][index].numpy()
    maskable = (tokens != d.pad()) & (tokens != d.bos()) & (tokens != d.eos())
    return model, task, tokens, maskable, values


class RunningMoments:
    """Mean and summed squared deviations of a stream of vectors (Welford's update, float64), so that
    the sample variance of hundreds of gradients needs no more than three vectors of their size."""

    def __init__(self):
        self.count, self.mean, self.m2 = 0, None, None

    def add(self, x: torch.Tensor) -> None:
        x = x.double()
        self.count += 1
        if self.mean is None:
            self.mean, self.m2 = x.clone(), torch.zeros_like(x)
            return
        delta = x - self.mean
        self.mean += delta / self.count
        self.m2 += delta * (x - self.mean)

    def variance_per_parameter(self) -> float:
        """Sum over parameters of the sample variance (ddof 1), divided by their number."""
        if self.count < 2:
            raise ValueError("a sample variance needs two draws at least")
        return float(self.m2.sum()) / (self.count - 1) / self.m2.numel()


class GradientProbe:
    """``g(masks)``: flattened gradient of the summed MLM loss / #masked over the probed parameters,
    a float32 vector on the model's device."""

    def __init__(self, model, task, tokens, params_regex: str):
        self.device = next(model.parameters()).device
        self.model, self.tokens = model, tokens.to(self.device)
        self.mask_idx, self.pad = task.mask_idx, task.source_dictionary.pad()
        self.params = [p for name, p in model.named_parameters() if re.search(params_regex, name)]
        if not self.params:
            raise ValueError(f"no parameter matches {params_regex!r}")
        self.size = sum(p.numel() for p in self.params)
        self.calls = 0

    def __call__(self, masks: np.ndarray) -> torch.Tensor:
        mask = torch.from_numpy(masks).to(self.device)
        source = self.tokens.masked_fill(mask, self.mask_idx)
        target = self.tokens.masked_fill(~mask, self.pad)
        self.model.zero_grad()
        logits = self.model(source, masked_tokens=mask)[0]
        loss = torch.nn.functional.cross_entropy(logits.float(), target[mask], reduction="mean")
        loss.backward()
        self.calls += 1
        return torch.cat([p.grad.reshape(-1) for p in self.params]).float()


def uniform_masks(maskable: np.ndarray, tau: np.ndarray, rng) -> np.ndarray:
    out = np.zeros_like(maskable)
    for i, row in enumerate(maskable):
        out[i, rng.choice(np.flatnonzero(row), tau[i], replace=False)] = True
    return out


def pair_with_overlap(maskable, tau, overlap_share, rng):
    """Masks m1 (uniform) and m2 sharing round(share * tau) positions with m1 per sequence."""
    m1, m2 = np.zeros_like(maskable), np.zeros_like(maskable)
    for i, row in enumerate(maskable):
        positions = rng.permutation(np.flatnonzero(row))
        o = int(round(overlap_share * tau[i]))
        m1[i, positions[:tau[i]]] = True
        m2[i, np.concatenate([positions[:o], positions[tau[i]:2 * tau[i] - o]])] = True
    return m1, m2


def fe_sets(maskable, k, tau, rng):
    """K disjoint masks per sequence (a permutation cut into K chunks of tau)."""
    views = np.zeros((k,) + maskable.shape, dtype=bool)
    for i, row in enumerate(maskable):
        order = rng.permutation(np.flatnonzero(row))
        for j in range(k):
            views[j, i, order[j * tau[i]:(j + 1) * tau[i]]] = True
    return views


def l3_probabilities(plt: np.ndarray, maskable: np.ndarray, args) -> np.ndarray:
    """The l3 policy's per-token probabilities of every row (Kimura et al., Eq. 4; capped at --l3-max-prob)."""
    from fairseq_maskplug.masking import mask_probabilities

    return np.stack([mask_probabilities(plt[i], args.l3_mean, maskable[i], cap=args.l3_max_prob)
                     for i in range(len(plt))])


def l3_sets(probs: np.ndarray, k: int, rng):
    """``(k independent l3 masks, k disjoint l3 views)``, each ``k x batch x len``."""
    from fairseq_maskplug.masking.fully_explored import bernoulli_views

    independent = rng.random((k,) + probs.shape) < probs
    views = np.stack([bernoulli_views(row, k, rng) for row in probs], axis=1)
    return independent, views


def smoke_checkpoint(root: Path, plt_track: str = None):
    """``(checkpoint, data)`` for ``--smoke``: a tiny roberta trained one update on a synthetic corpus
    (with a random PLT track named ``plt_track``, if given), in one process (``--num-workers 0``: no
    data-loader process to tear down at exit, where CI twice saw this run fail after it had trained)."""
    data = make_data(root, lines=200)
    if plt_track:
        from fairseq.data import Dictionary, data_utils
        from fairseq_maskplug.data import write_side_info

        rng = np.random.default_rng(0)
        for split in ("train",):
            tokens = data_utils.load_indexed_dataset(str(data / split), Dictionary.load(str(data / "dict.txt")))
            write_side_info(str(data / f"{split}.{plt_track}"), (rng.beta(4, 1, n) for n in np.array(tokens.sizes)),
                            tokens_prefix=str(data / split))
    run_checked([BIN / "fairseq-train", data, "--user-dir", REPO / "fairseq_maskplug", "--task", "guided_mlm",
                 "--criterion", "masked_lm", "--arch", "roberta_base", "--encoder-layers", "2",
                 "--encoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64", "--encoder-attention-heads", "2",
                 "--max-positions", "64", "--tokens-per-sample", "64", "--max-update", "1", "--cpu",
                 "--num-workers", "0",
                 "--optimizer", "adam", "--lr", "1e-4", "--batch-size", "8", "--no-epoch-checkpoints",
                 "--disable-validation", "--save-dir", root / "ck", "--valid-subset", "train"])
    return str(root / "ck" / "checkpoint_last.pt"), str(data)


def main():
    parser = benchmark_parser(__doc__)
    parser.add_argument("--checkpoint", help="roberta MLM checkpoint (required unless --smoke)")
    parser.add_argument("--data", help="binarized masked-LM data directory (required unless --smoke)")
    parser.add_argument("--split", default="valid")
    parser.add_argument("--out", type=Path, help="output prefix for .csv and .png (required unless --smoke)")
    parser.add_argument("--batch", type=int, default=8, help="sequences in the fixed minibatch")
    parser.add_argument("--tokens-per-sample", type=int, default=128)
    parser.add_argument("--ratio", type=float, default=0.15, help="tau / n per mask")
    parser.add_argument("--views", type=int, default=4, help="K")
    parser.add_argument("--pairs", type=int, default=24, help="mask pairs per Hamming distance")
    parser.add_argument("--levels", type=int, default=6, help="Hamming distances from 0 to 2 tau")
    parser.add_argument("--sets", type=int, default=48, help="K-mask draws per method for (b)")
    parser.add_argument("--params", default=r"layers\.\d+\.fc2\.weight$|lm_head\.dense\.weight$",
                        help="regex of the probed parameter names")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=1,
                        help="minibatches (and mask seeds) for (b): the ratio's mean and standard error over them")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when there is one)")
    parser.add_argument("--mask-policy", choices=["uniform", "l3"], default="uniform",
                        help="uniform: the paper's tau-token masks; l3: l3 masks and views (ours)")
    parser.add_argument("--l3-track", default="plt", help="l3: the PLT side-information track")
    parser.add_argument("--l3-mean", type=float, default=0.15, help="l3: mean mask probability")
    parser.add_argument("--l3-max-prob", type=float, default=0.25, help="l3: largest mask probability (<= 1/K)")
    args = shrink(parser.parse_args(), batch=2, tokens_per_sample=64, pairs=3, levels=3, sets=3, split="train")
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    if args.views * args.ratio > 1:
        parser.error("--views * --ratio must be <= 1")
    if args.mask_policy == "l3" and args.views * args.l3_max_prob > 1 + 1e-12:
        parser.error(f"--views {args.views} needs --l3-max-prob <= 1/{args.views}")
    if args.smoke:
        with tempfile.TemporaryDirectory() as tmp:
            plt_track = args.l3_track if args.mask_policy == "l3" else None
            args.checkpoint, args.data = smoke_checkpoint(Path(tmp), plt_track)
            args.out = Path(tmp) / "out" / "fe_variance"
            return probe(args)
    if not (args.checkpoint and args.data and args.out):
        parser.error("--checkpoint, --data and --out are required (or --smoke)")
    return probe(args)


def probe(args):
    """(b) on each of ``--seeds`` minibatches, (a) on the first; prints the ratio line."""
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    l3 = args.mask_policy == "l3"
    ratios = []
    for k in range(args.seeds):
        rng = np.random.default_rng(args.seed + k)
        model, task, tokens, maskable_t, plt = load(args.checkpoint, args.data, args.split, args.batch,
                                                    args.tokens_per_sample, args.l3_track if l3 else None,
                                                    offset=k * args.batch)
        model = model.to(device)
        if args.seeds > 1:
            print(f"seed {args.seed + k}: minibatch {k + 1} (blocks {k * args.batch}-{(k + 1) * args.batch - 1}) "
                  f"on {device}")
        run = probe_l3 if l3 else probe_uniform
        ratios.append(run(args, model, task, tokens, maskable_t.numpy(), plt, rng, covariance=k == 0))
    if len(ratios) == 1:
        print(f"ratio={ratios[0]:.3f}")
        return
    mean, stderr = float(np.mean(ratios)), float(np.std(ratios, ddof=1) / np.sqrt(len(ratios)))
    print(f"ratios over {len(ratios)} seeds: {' '.join(f'{r:.3f}' for r in ratios)}; mean {mean:.3f} +- {stderr:.3f}")
    print(f"ratio={mean:.3f} stderr={stderr:.3f} seeds={len(ratios)}")


def probe_uniform(args, model, task, tokens, maskable, plt, rng, covariance=True) -> float:
    """(b) for the paper's uniform masks of tau tokens, then (a) if ``covariance``; returns the ratio."""
    tau = np.minimum(np.round(args.ratio * maskable.sum(1)).astype(int), maskable.sum(1) // args.views)
    g = GradientProbe(model, task, tokens, args.params)
    print(f"minibatch {tokens.shape[0]} x {tokens.shape[1]}, tau per sequence {tau.tolist()}, "
          f"{g.size} probed parameters")

    # (b) first: its independent uniform masks also give g_bar for (a)
    random_est, fe_est, singles = RunningMoments(), RunningMoments(), RunningMoments()
    for _ in tqdm(range(args.sets), desc="K-mask estimates", disable=None):
        total = None
        for _ in range(args.views):
            grad = g(uniform_masks(maskable, tau, rng))
            singles.add(grad)
            total = grad.double() if total is None else total + grad
        random_est.add(total / args.views)
        total = None
        for m in fe_sets(maskable, args.views, tau, rng):
            grad = g(m).double()
            total = grad if total is None else total + grad
        fe_est.add(total / args.views)
    var_random, var_fe = random_est.variance_per_parameter(), fe_est.variance_per_parameter()
    print(f"variance of the {args.views}-mask gradient: FE {var_fe:.4e}, independent random {var_random:.4e}; "
          f"ratio {var_fe / var_random:.3f}")
    if covariance:
        covariance_by_distance(args, g, maskable, tau, singles.mean, rng)
    print(f"gradients computed: {g.calls}")
    return var_fe / var_random


def covariance_by_distance(args, g, maskable, tau, g_bar, rng) -> None:
    """(a): covariance of the gradients of two masks against their Hamming distance; CSV, PNG, table."""
    rows = []
    for level in tqdm(range(args.levels), desc="covariance vs distance", disable=None):
        share = 1 - level / (args.levels - 1)  # overlap share: 1 (H = 0) .. 0 (H = 2 tau)
        products = []
        for _ in range(args.pairs):
            m1, m2 = pair_with_overlap(maskable, tau, share, rng)
            products.append(float(((g(m1).double() - g_bar) @ (g(m2).double() - g_bar))) / g.size)
        hamming = 2 * np.mean(tau - np.round(share * tau))
        se = np.std(products, ddof=1) / np.sqrt(len(products))
        rows.append({"hamming_per_sequence": hamming, "hamming_over_tau": hamming / tau.mean(),
                     "covariance": np.mean(products), "stderr": se})

    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out.with_suffix(".csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(5, 3.5))
        ax.errorbar([r["hamming_per_sequence"] for r in rows], [r["covariance"] for r in rows],
                    yerr=[2 * r["stderr"] for r in rows], marker="o", capsize=3)
        ax.set_xlabel("Hamming distance H(m1, m2) per sequence")
        ax.set_ylabel("Cov(g(m1), g(m2)) per parameter")
        ax.set_title(f"gradient covariance vs mask distance (tau = {tau.mean():.0f})")
        fig.tight_layout()
        fig.savefig(args.out.with_suffix(".png"), dpi=120)
        print(f"plot: {args.out.with_suffix('.png')}")
    except ImportError:
        print("matplotlib not installed (MASKPLUG_EXTRAS=plot bash recipes/setup_env.sh): no PNG, CSV only")
    print("hamming  covariance  (+- stderr)")
    for r in rows:
        print(f"{r['hamming_per_sequence']:7.1f}  {r['covariance']:.4e}  (+- {r['stderr']:.1e})")


def probe_l3(args, model, task, tokens, maskable, plt, rng, covariance=False) -> float:
    """(b) for the l3 policy: K disjoint l3 views against K independent l3 masks; returns the ratio."""
    probs = l3_probabilities(plt, maskable, args)
    g = GradientProbe(model, task, tokens, args.params)
    print(f"minibatch {tokens.shape[0]} x {tokens.shape[1]}, l3 masks: mean probability "
          f"{probs[maskable].mean():.3f}, largest {probs.max():.3f}, {g.size} probed parameters")
    random_est, fe_est = RunningMoments(), RunningMoments()
    for _ in tqdm(range(args.sets), desc="K-mask estimates", disable=None):
        independent, views = l3_sets(probs, args.views, rng)
        random_est.add(sum(g(m).double() for m in independent) / args.views)
        fe_est.add(sum(g(m).double() for m in views) / args.views)
    var_random, var_fe = random_est.variance_per_parameter(), fe_est.variance_per_parameter()
    print(f"gradients computed: {g.calls}")
    print(f"variance of the {args.views}-mask gradient, l3 masks: FE views {var_fe:.4e}, independent {var_random:.4e}")
    return var_fe / var_random


if __name__ == "__main__":
    main()

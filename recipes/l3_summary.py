"""What L3 probabilities look like on a PLT track: mean PLT, mean p, share of tokens with p >= 0.5.

    python recipes/l3_summary.py DATA/input0/train.plt [--mean 0.15]

Probabilities are computed per line (one sentence per item, as the joint task blocks).
"""

import argparse

import numpy as np


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("prefix", help="side-information prefix, e.g. data/mr/input0/train.plt")
    parser.add_argument("--mean", type=float, default=0.15)
    args = parser.parse_args()
    from fairseq_maskplug.data import SideInfoDataset
    from fairseq_maskplug.masking import mask_probabilities

    plt_rows = SideInfoDataset(args.prefix)
    plts, probs = [], []
    for i in range(len(plt_rows)):
        plt = plt_rows[i].numpy()[:-1]  # drop </s>
        plts.append(plt)
        probs.append(mask_probabilities(plt, args.mean))
    plts, probs = np.concatenate(plts), np.concatenate(probs)
    print(f"{len(plt_rows)} sentences, {plts.size} tokens: mean PLT {plts.mean():.3f}, "
          f"mean p {probs.mean():.4f}, share p >= 0.5: {100 * (probs >= 0.5).mean():.2f}%, "
          f"share p = 1: {100 * (probs >= 1).mean():.2f}%")


if __name__ == "__main__":
    main()

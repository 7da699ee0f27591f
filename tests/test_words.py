"""``--mask-unit word``: word starts of sentencepiece, GPT-2 BPE and whitespace data, any policy choosing
whole words (distribution over many seeds), and the task on real fairseq-preprocess output."""

import json
from types import SimpleNamespace

import numpy as np
import pytest
from fairseq import options, tasks
from fairseq.data import Dictionary, data_utils
from fairseq.dataclass.utils import convert_namespace_to_omegaconf

from fairseq_helpers import BIN, check, json_logs, run, sentencepiece_data, train
from fairseq_maskplug.data.word_boundaries import detect_boundaries, word_start_symbols
from fairseq_maskplug.masking import build_mask_policy, maskable_positions
from fairseq_maskplug.masking.l3 import mask_probabilities
from fairseq_maskplug.masking.registry import MaskPolicy
from fairseq_maskplug.masking.words import WordUnitPolicy, Words, word_starts
from fairseq_maskplug.tools.binarize import write_lines
from release_helpers import learn_gpt2_bpe, mr_sentences, news_text
from stats_helpers import assert_mean, assert_proportion

SEEDS = 4000


def policy_cfg(**options):
    """Every registered policy's options at their defaults, with ``options`` set."""
    import dataclasses

    from fairseq_maskplug.masking import policy_option_dataclasses

    values = {f.name: f.default for dc in policy_option_dataclasses() for f in dataclasses.fields(dc)}
    values.update(options)
    return SimpleNamespace(**values)


# ---- layer 1: words of a block -------------------------------------------------------------------

#: ids 0-3 special; 4, 5, 6 start words, 7, 8 continue one
STARTS = np.array([True, True, True, True, True, True, True, False, False])
BLOCK = np.array([0, 7, 4, 7, 8, 5, 6, 7, 2, 4, 8, 2])  # <s> 7 | 4 7 8 | 5 | 6 7 </s> 4 8 </s>
MASKABLE = maskable_positions(BLOCK, (0, 1, 2))


def test_words_start_at_marked_tokens_after_specials_and_at_cut_blocks():
    starts = word_starts(BLOCK, MASKABLE, STARTS)
    # the 7 after <s> is a word (a block cut inside a word starts with its rest); specials are their own
    assert np.flatnonzero(starts).tolist() == [0, 1, 2, 5, 6, 8, 9, 11]
    words = Words(BLOCK, MASKABLE, STARTS)
    assert words.tokens.tolist() == [0, 7, 4, 5, 6, 2, 4, 2]
    assert words.maskable.tolist() == [False, True, True, True, True, False, True, False]
    assert words.expand(np.array([0, 0, 1, 0, 1, 0, 0, 0], dtype=bool)).tolist() == [
        False, False, True, True, True, False, True, True, False, False, False, False]
    assert words.reduce(np.arange(12.0), "max").tolist() == [0, 1, 4, 5, 7, 8, 10, 11]
    assert words.reduce(np.arange(12.0), "prod")[2] == 2 * 3 * 4
    assert words.covering(np.eye(12, dtype=bool)[3]).tolist() == words.expand(np.eye(8, dtype=bool)[2]).tolist()


def random_block(rng, words=40):
    """A block of ``words`` words of 1-3 subwords between <s> and </s> (ids as in :data:`STARTS`)."""
    body = []
    for _ in range(words):
        body += [int(rng.integers(4, 7))] + [int(rng.integers(7, 9)) for _ in range(int(rng.integers(0, 3)))]
    return np.array([0, *body, 2])


def test_random_words_mask_whole_words_each_with_the_rate():
    """Every word is masked whole or not at all; each maskable word is chosen with probability p (the rate
    is per word), and the count per block is floor(p W + U): mean p W."""
    block = random_block(np.random.default_rng(0))
    maskable = maskable_positions(block, (0, 1, 2))
    words = Words(block, maskable, STARTS)
    policy = WordUnitPolicy(build_mask_policy("random", policy_cfg(mask_prob=0.2)), STARTS)
    chosen_words = np.zeros(len(words.first), dtype=np.int64)
    counts = []
    for seed in range(SEEDS):
        mask = policy.choose(block, maskable, {}, np.random.default_rng(seed))
        per_word = np.bincount(words.ids, weights=mask, minlength=len(words.first))
        lengths = np.bincount(words.ids)
        assert set(np.flatnonzero(per_word)) == set(np.flatnonzero(per_word == lengths)), "a word was split"
        chosen_words += per_word > 0
        counts.append(int((per_word > 0).sum()))
    assert_mean(counts, 0.2 * words.maskable.sum(), "words per block")
    for w in np.flatnonzero(words.maskable)[:10]:
        assert_proportion(int(chosen_words[w]), SEEDS, 0.2, f"word {w}")
    assert chosen_words[~words.maskable].sum() == 0


def test_span_words_are_runs_of_whole_words():
    block = random_block(np.random.default_rng(1))
    maskable = maskable_positions(block, (0, 1, 2))
    words = Words(block, maskable, STARTS)
    policy = WordUnitPolicy(build_mask_policy("span", policy_cfg(span_mask_prob=0.3)), STARTS)
    for seed in range(200):
        mask = policy.choose(block, maskable, {}, np.random.default_rng(seed))
        per_word = np.bincount(words.ids, weights=mask) / np.bincount(words.ids)
        assert set(per_word.tolist()) <= {0.0, 1.0}
        assert (per_word > 0).sum() == int(0.3 * words.maskable.sum()) or (per_word > 0).sum() == int(
            0.3 * words.maskable.sum()) + 1  # floor(p W + U) words


def test_l3_words_take_the_product_of_their_subwords_plt_and_keep_the_mean_per_word():
    rng = np.random.default_rng(2)
    block = random_block(rng)
    maskable = maskable_positions(block, (0, 1, 2))
    plt = rng.uniform(0.05, 1.0, len(block))
    words = Words(block, maskable, STARTS)
    policy = WordUnitPolicy(build_mask_policy("l3", policy_cfg(l3_mean=0.15)), STARTS)
    p = policy.probabilities(block, maskable, {"plt": plt})
    word_plt = np.multiply.reduceat(plt, words.first)
    expected = mask_probabilities(word_plt, 0.15, words.maskable)
    assert np.allclose(p, expected[words.ids])
    assert np.isclose(expected[words.maskable].mean(), 0.15)  # p_bar over the words
    hits = np.zeros(len(words.first))
    for seed in range(SEEDS):
        mask = policy.choose(block, maskable, {"plt": plt}, np.random.default_rng(seed))
        hits += np.bincount(words.ids, weights=mask) > 0
    for w in np.flatnonzero(words.maskable)[:8]:
        assert_proportion(int(hits[w]), SEEDS, float(expected[w]), f"word {w}")


def test_views_of_words_are_disjoint_whole_words():
    block = random_block(np.random.default_rng(3))
    maskable = maskable_positions(block, (0, 1, 2))
    words = Words(block, maskable, STARTS)
    policy = WordUnitPolicy(build_mask_policy("random", policy_cfg(mask_prob=0.15)), STARTS)
    assert policy.defines_views()
    for seed in range(100):
        views = policy.views(block, maskable, {}, np.random.default_rng(seed), 4)
        assert views.shape == (4, len(block)) and views.sum(axis=0).max() <= 1
        for view in views:
            per_word = np.bincount(words.ids, weights=view) / np.bincount(words.ids)
            assert set(per_word.tolist()) <= {0.0, 1.0}


def test_entity_spans_grow_to_the_words_they_touch():
    from fairseq_maskplug.masking.salient import span_ids

    block = np.array([0, 4, 7, 5, 7, 8, 6, 2])  # words: [4 7] [5 7 8] [6]
    maskable = maskable_positions(block, (0, 1, 2))
    spans = np.zeros(len(block), dtype=np.int64)
    spans[1:-1] = span_ids(6, [(1, 3)])  # tokens 2-3 of the line: the 7 of word 1 and the 5 of word 2
    policy = WordUnitPolicy(build_mask_policy("salient_span", policy_cfg()), STARTS)
    mask = policy.choose(block, maskable, {"salient_spans": spans}, np.random.default_rng(0))
    assert mask.tolist() == [False, True, True, True, True, True, False, False]
    assert policy.views_refused and not policy.defines_views()


def test_a_policy_that_does_not_say_how_its_track_combines_over_words_is_refused():
    class Scored(MaskPolicy):
        registered_name = "scored"
        side_info_names = ("score",)

        def choose(self, tokens, maskable, side_info, rng):
            return maskable & (side_info["score"] > 0)

    with pytest.raises(ValueError, match="does not say how its track.*score.*word_reductions"):
        WordUnitPolicy(Scored(SimpleNamespace()), STARTS)


# ---- word starts of real vocabularies ------------------------------------------------------------

SENTENCES = [s for _, s in mr_sentences(200, seed=5)] + news_text(100, seed=5)


@pytest.fixture(scope="module")
def spm_data(tmp_path_factory):
    return sentencepiece_data(tmp_path_factory.mktemp("spm_words"), SENTENCES, 90, valid_lines=40)


@pytest.fixture(scope="module")
def gpt2_data(tmp_path_factory):
    """The tests' tiny GPT-2 BPE (the fake release's), text encoded by fairseq's own encoder."""
    from fairseq.data.encoders.gpt2_bpe_utils import get_encoder

    root = tmp_path_factory.mktemp("gpt2_words")
    encoder, learned = learn_gpt2_bpe(SENTENCES, 60)
    (root / "encoder.json").write_text(json.dumps(encoder, ensure_ascii=False), encoding="utf-8")
    (root / "vocab.bpe").write_text("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in learned), encoding="utf-8")
    (root / "dict.txt").write_text("".join(f"{i} 1\n" for i in sorted(encoder.values())), encoding="utf-8")
    bpe = get_encoder(str(root / "encoder.json"), str(root / "vocab.bpe"))
    write_lines(root / "train.bpe", [" ".join(map(str, bpe.encode(s))) for s in SENTENCES])
    check(run([BIN / "fairseq-preprocess", "--only-source", "--srcdict", root / "dict.txt", "--trainpref",
               root / "train.bpe", "--validpref", root / "train.bpe", "--destdir", root / "bin", "--workers", "1"]))
    return root, bpe


def spelled_words(dictionary, starts_table, line, spell):
    maskable = maskable_positions(line, (dictionary.bos(), dictionary.eos(), dictionary.pad()))
    words = Words(line, maskable, starts_table)
    bounds = np.append(words.first, len(line))
    return [spell(line[a:b]) for a, b, m in zip(bounds, bounds[1:], words.maskable) if m]


def test_sentencepiece_words_are_the_text_words(spm_data):
    dictionary = Dictionary.load(str(spm_data / "bin" / "dict.txt"))
    assert detect_boundaries(dictionary.symbols) == "sentencepiece"
    starts, used = word_start_symbols(dictionary)
    tokens = data_utils.load_indexed_dataset(str(spm_data / "bin" / "train"), dictionary)
    spell = lambda ids: "".join(dictionary.symbols[int(i)] for i in ids).replace("\u2581", "")  # noqa: E731
    multi = 0
    for i in range(len(SENTENCES)):
        line = tokens[i].numpy()
        assert spelled_words(dictionary, starts, line, spell) == SENTENCES[i].split()
        multi += len(line) - 1 - len(SENTENCES[i].split())
    assert multi > 100  # many words of several pieces


def test_gpt2_words_start_at_the_space_byte_and_need_encoder_json(gpt2_data):
    root, bpe = gpt2_data
    dictionary = Dictionary.load(str(root / "bin" / "dict.txt"))
    assert detect_boundaries(dictionary.symbols) == "gpt2"
    with pytest.raises(ValueError, match="--gpt2-encoder-json"):
        word_start_symbols(dictionary)
    starts, used = word_start_symbols(dictionary, "auto", str(root / "encoder.json"))
    tokens = data_utils.load_indexed_dataset(str(root / "bin" / "train"), dictionary)
    spell = lambda ids: bpe.decode([int(dictionary.symbols[int(i)]) for i in ids])  # noqa: E731
    for i in range(len(SENTENCES)):
        # GPT-2's pre-tokenizer keeps punctuation after a word in that word (fairseq's rule: a space starts one)
        assert [w.strip() for w in spelled_words(dictionary, starts, tokens[i].numpy(), spell)] == SENTENCES[i].split()


def test_gpt2_word_starts_agree_with_fairseqs_whole_word_mask(gpt2_data):
    """fairseq's get_whole_word_mask (which decodes every label through the BPE) marks the same symbols of
    dict.txt. (The task's appended <mask> is a word of its own here, not a continuation as there; it is
    never in the data.)"""
    from fairseq_maskplug.scoring.pll import word_starts_gpt2

    root, _ = gpt2_data
    dictionary = Dictionary.load(str(root / "bin" / "dict.txt"))
    ours, _ = word_start_symbols(dictionary, "gpt2", str(root / "encoder.json"))
    theirs = word_starts_gpt2(dictionary, str(root / "encoder.json"), str(root / "vocab.bpe"))
    assert ours.tolist() == theirs.tolist() and 0 < ours.sum() < len(ours)


def test_wordpiece_words_start_at_every_piece_without_hashes():
    """A converted BERT's dictionary (fairseq_maskplug.interop.bert): ``##`` marks a continuation; found by ``auto``
    where ``##`` pieces are a real share of the vocabulary, not where a corpus has a stray one."""
    dictionary = Dictionary()
    for symbol in ["the", "un", "##lab", "##elled", "film", "##s", ".", "#", "##", "[unused0]"]:
        dictionary.add_symbol(symbol)
    assert detect_boundaries(dictionary.symbols, dictionary.nspecial) == "wordpiece"
    starts, used = word_start_symbols(dictionary)
    assert used == "wordpiece"
    assert [s for s, start in zip(dictionary.symbols, starts) if not start] == ["##lab", "##elled", "##s"]
    stray = Dictionary()
    for i in range(40):
        stray.add_symbol(f"word{i}")
    stray.add_symbol("##tag")
    assert detect_boundaries(stray.symbols, stray.nspecial) == "whitespace"


def test_whitespace_data_has_one_word_per_token(tiny_data):
    dictionary = Dictionary.load(str(tiny_data / "bin" / "dict.txt"))
    starts, used = word_start_symbols(dictionary)
    assert used == "whitespace" and starts.all()
    with pytest.raises(ValueError, match="read only for GPT-2"):
        word_start_symbols(dictionary, "auto", "encoder.json")


# ---- the task, on real binarized data ------------------------------------------------------------

def make_task(data, *flags, task="guided_mlm"):
    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(data), "--task", task, "--arch", "roberta_base", "--tokens-per-sample", "64", *map(str, flags)])
    return tasks.setup_task(convert_namespace_to_omegaconf(args).task)


def test_guided_mlm_masks_whole_gpt2_words_and_counts_words(gpt2_data):
    root, bpe = gpt2_data
    task = make_task(root / "bin", "--mask-policy", "random", "--mask-unit", "word", "--gpt2-encoder-json",
                     root / "encoder.json", "--mask-prob", "0.3")
    task.load_dataset("train")
    dataset, d = task.dataset("train"), task.source_dictionary
    starts, _ = word_start_symbols(d, "gpt2", str(root / "encoder.json"))
    word_total = chosen_total = multi_token_words = 0
    for i in range(len(dataset)):
        item = dataset[i]
        target = item["target"].numpy()
        chosen = target != d.pad()
        source_tokens = np.where(chosen, target, item["source"].numpy())
        maskable = maskable_positions(source_tokens, (d.bos(), d.eos(), d.pad()))
        words = Words(source_tokens, maskable, starts)
        per_word = np.bincount(words.ids, weights=chosen) / np.bincount(words.ids)
        assert set(per_word.tolist()) <= {0.0, 1.0}, "a GPT-2 word was split"
        multi_token_words += int((np.bincount(words.ids) > 1).sum())
        (tok_chosen, tok_maskable, units_chosen, units), = item["mask_counts"].tolist()
        assert (units_chosen, units) == (int((per_word > 0).sum()), int(words.maskable.sum()))
        word_total, chosen_total = word_total + units, chosen_total + units_chosen
    assert_proportion(chosen_total, word_total, 0.3, "share of words masked")
    assert multi_token_words > 100  # words of several tokens were there to split


def test_mask_unit_options_are_refused_where_nothing_reads_them(tiny_data, gpt2_data):
    with pytest.raises(ValueError, match="--word-boundaries is read only with --mask-unit word"):
        make_task(tiny_data / "bin", "--word-boundaries", "sentencepiece")
    # fe_mlm's views are always a policy's (random by default), so whole-word views need no more flags
    assert make_task(tiny_data / "bin", "--mask-unit", "word", "--fe-views", "2", task="fe_mlm").policy.inner
    root, _ = gpt2_data
    with pytest.raises(ValueError, match="give --gpt2-encoder-json"):
        make_task(root / "bin", "--mask-unit", "word")


@pytest.mark.e2e
def test_fairseq_train_logs_both_rates_with_whole_words(spm_data, tmp_path):
    result = check(train(spm_data / "bin", tmp_path / "ck", "--mask-policy", "span", "--mask-unit", "word",
                         "--max-update", "4"))
    record = json_logs(result, "train")[-1]
    assert float(record["train_unit_mask_rate"]) > 0 and float(record["train_mask_rate"]) > 0

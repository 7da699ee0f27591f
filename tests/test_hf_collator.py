"""Every mask policy as a Hugging Face data collator (``fairseq_maskplug/hf.py``) draws what fairseq draws.

On sentencepiece data binarized as the demo's (``test_hf_export.sp_data``) with every built-in policy's
tracks (``test_policy_task_matrix.write_tracks``), the raw lines go through the exported tokenizer and
the tracks through ``track_column``; for every policy that needs no training feedback, the collator's
rows equal the items of real ``guided_mlm`` datasets (``--sample-break-mode eos``: one line an item)
at the same seed, epoch and row (``draws="epoch"``): chosen positions, corrupted input, labels; also under ``--mask-unit
word``. A tiny ``RobertaForMaskedLM`` trains with ``transformers.Trainer`` and the ``selective`` and
``pmi`` collators, and with ``PolicyTrainer`` and PTW's collator (full tier). Fresh draws (the default) differ
at every call, across DataLoader workers and without ``idx``; ``PolicyTrainer`` keeps the track columns under the
Trainer's default ``remove_unused_columns=True``.
"""

import warnings

import numpy as np
import pytest
import torch
from fairseq import options, tasks
from fairseq.dataclass.utils import convert_namespace_to_omegaconf

from fairseq_helpers import transformers_or_skip
from test_hf_export import sentences, sp_data  # noqa: F401  (fixture)
from test_policy_task_matrix import FEEDBACK, POLICIES, write_tracks

transformers = transformers_or_skip()

from fairseq_maskplug.hf import IGNORE_INDEX, PolicyCollator, track_column  # noqa: E402

ROWS = 40  # lines compared per policy and epoch


@pytest.fixture(scope="module")
def collator_data(sp_data):
    """``(data dir, tokenizer, examples)``: every policy's tracks written beside the splits, the train lines'
    raw text tokenized by the exported tokenizer with every track as a column."""
    from fairseq_maskplug.interop.gpt2_vocab import read_dict_symbols
    from fairseq_maskplug.interop.tokenizer import sentencepiece_tokenizer

    root, model, dict_path, data = sp_data
    write_tracks(data, np.random.default_rng(0))
    tokenizer = sentencepiece_tokenizer(transformers, model, read_dict_symbols(dict_path), 512)
    raw = sentences(600, 0)[:560]  # the train split's lines, as sp_data wrote them
    names = ("plt", "importance", "salient_spans", "span_start", "span_end", "pmi_units", "pos", "informask_rate",
             "token_likelihood", "difference_score")
    columns = {name: track_column(str(data / "train"), name, tokenizer=tokenizer) for name in names}
    examples = [{"input_ids": tokenizer(text)["input_ids"], "idx": i, **{n: columns[n][i] for n in names}}
                for i, text in enumerate(raw)]
    return data, tokenizer, examples


def fairseq_dataset(data, policy, *extra, task="guided_mlm"):
    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(data), "--task", task, "--arch", "roberta_base", "--tokens-per-sample", "128",
        "--sample-break-mode", "eos", "--mask-policy", policy, "--seed", "7", *extra])
    task = tasks.setup_task(convert_namespace_to_omegaconf(args).task)
    task.load_dataset("train")
    return task.dataset("train")


@pytest.mark.parametrize("unit", ["token", pytest.param("word", marks=pytest.mark.full)])  # word: a second path
@pytest.mark.parametrize("policy", sorted(POLICIES - FEEDBACK))
def test_the_collator_draws_the_items_fairseq_draws(collator_data, policy, unit):
    data, tokenizer, examples = collator_data
    extra = ["--mask-unit", "word"] if unit == "word" else []
    if unit == "word" and policy in ("salient_span", "learned_span"):
        pytest.skip("spans are already words here; --mask-unit word refuses them")
    dataset = fairseq_dataset(data, policy, *extra)
    collator = PolicyCollator(tokenizer, policy, seed=7, mask_unit=unit, draws="epoch")
    chosen = 0
    for epoch in (1, 2):
        dataset.set_epoch(epoch)
        collator.set_epoch(epoch)
        for i in range(ROWS):
            item = dataset[i]
            ours = collator.draw(examples[i])
            assert torch.equal(ours["source"], item["source"]), (policy, epoch, i)
            assert torch.equal(ours["target"], item["target"]), (policy, epoch, i)
            chosen += int(item["target"].ne(1).sum())
    assert chosen > 0  # the comparison saw chosen positions


#: the built-in policies that define fully-explored views (fe_mlm refuses the others)
VIEW_POLICIES = ["informask", "l3", "pmi", "random", "span"]


@pytest.mark.parametrize("policy", VIEW_POLICIES)
def test_the_views_collator_draws_the_views_fe_mlm_draws(collator_data, policy):
    """``views=K``: the example's K views equal ``--task fe_mlm --fe-views K``'s item at the same seed, epoch and
    row, and the batch holds them as K adjacent rows (fairseq's layout), each view's labels disjoint."""
    from fairseq_maskplug.data import PolicyMaskedDataset, load_blocked_split

    data, tokenizer, examples = collator_data
    k = 2
    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(data), "--task", "fe_mlm", "--arch", "roberta_base", "--tokens-per-sample", "128", "--sample-break-mode",
        "eos", "--mask-policy", policy, "--seed", "7", "--fe-views", str(k)])
    task = tasks.setup_task(convert_namespace_to_omegaconf(args).task)
    # fe_mlm's dataset as its build_inputs makes it (the task's policy, corruption and specials); its load refuses
    # this data for the one-token lines it holds, which can hold no 2 views, so no row below is one of them
    blocks, side_info = load_blocked_split(task.blocking_cfg(), "train", task.dictionary, task.side_info_rules, 1,
                                           False, framing=task.framing_tokens)
    dataset = PolicyMaskedDataset(blocks, side_info, task.policy, task.corruption, task.special_ids,
                                  pad_idx=task.dictionary.pad(), seed=7, views=k)
    collator = PolicyCollator(tokenizer, policy, seed=7, views=k, draws="epoch")
    chosen = 0
    for epoch in (1, 2):
        dataset.set_epoch(epoch)
        collator.set_epoch(epoch)
        for i in [i for i in range(2 * ROWS) if len(examples[i]["input_ids"]) >= 2 + k][:ROWS]:
            item, ours = dataset[i], collator.draw(examples[i])
            assert ours["source"].shape == (k, len(examples[i]["input_ids"]))
            assert torch.equal(ours["source"], item["source"]), (policy, epoch, i)
            assert torch.equal(ours["target"], item["target"]), (policy, epoch, i)
            chosen += int(item["target"].ne(1).sum())
    assert chosen > 0
    rows = [e for e in examples if len(e["input_ids"]) >= 2 + k][:8]
    batch = collator(rows)
    assert batch["input_ids"].shape[0] == 8 * k
    labelled = batch["labels"].ne(IGNORE_INDEX).view(8, k, -1)
    assert not (labelled.sum(1) > 1).any() and labelled.any()  # the K views of an example are disjoint
    for row in range(8 * k):  # each row is its example's tokens
        n = len(rows[row // k]["input_ids"])
        assert batch["attention_mask"][row].sum() == n
        original = torch.where(labelled.view(8 * k, -1)[row, :n], batch["labels"][row, :n], -1)
        ids = torch.tensor(rows[row // k]["input_ids"])
        assert torch.equal(original[original.ne(-1)], ids[original.ne(-1)])


def test_views_are_refused_where_fe_mlm_refuses_them(collator_data):
    _, tokenizer, _ = collator_data
    with pytest.raises(ValueError, match="cannot draw K disjoint views of --mask-policy selective"):
        PolicyCollator(tokenizer, "selective", views=2)
    with pytest.raises(ValueError, match="K disjoint views need K \\* rate <= 1"):
        PolicyCollator(tokenizer, "random", {"mask_prob": 0.4}, views=3)
    with pytest.raises(ValueError, match="views must be a whole number >= 1"):
        PolicyCollator(tokenizer, "random", views=0)


def denoising_task(data, policy, *extra):
    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(data), "--task", "guided_denoising", "--arch", "bart_base", "--tokens-per-sample", "128",
        "--sample-break-mode", "eos", "--mask-policy", policy, "--seed", "7", *extra])
    task = tasks.setup_task(convert_namespace_to_omegaconf(args).task)
    task.load_dataset("train")
    return task


@pytest.mark.parametrize("policy, target_format, extra", [
    ("random", "full", {}), ("random", "masked", {}), ("salient_span", "masked", {}), ("span", "t5", {}),
    ("random", "masked", {"collapse": "on", "leave_unmasked_prob": 0.1, "random_token_prob": 0.1}),
])
def test_the_denoising_collator_draws_guided_denoising_s_pairs(collator_data, policy, target_format, extra):
    """Each example's (source, target) equals ``--task guided_denoising``'s item at the same seed, epoch and row,
    in the three target formats (t5 with the tokenizer's sentinels at the ids the task gives them), collapsed or
    not, with and without 80/10/10; the batch's labels and decoder inputs are its targets."""
    import copy

    from fairseq_maskplug.hf import DenoisingCollator
    from fairseq_maskplug.masking.seq2seq import previous_output_tokens

    data, tokenizer, examples = collator_data
    flags = ["--target-format", target_format]
    flags += ["--collapse-spans", extra["collapse"]] if "collapse" in extra else []
    for name in ("leave_unmasked_prob", "random_token_prob"):
        flags += [f"--{name.replace('_', '-')}", str(extra[name])] if name in extra else []
    task = denoising_task(data, policy, *flags)
    dataset = task.dataset("train")
    if target_format == "t5":  # the task adds its 100 sentinels after <mask>; the tokenizer gets them likewise
        assert len(tokenizer) == task.sentinels[0]
        tokenizer = copy.deepcopy(tokenizer)
        tokenizer.add_tokens([f"<extra_id_{k}>" for k in range(100)], special_tokens=True)
    collator = DenoisingCollator(tokenizer, policy, seed=7, target_format=target_format, draws="epoch", **extra)
    masked = 0
    for epoch in (1, 2):
        dataset.set_epoch(epoch)
        collator.set_epoch(epoch)
        for i in range(ROWS):
            item, ours = dataset[i], collator.draw(examples[i])
            assert torch.equal(ours["source"], item["source"]), (policy, target_format, epoch, i)
            assert torch.equal(ours["target"], item["target"]), (policy, target_format, epoch, i)
            masked += int(len(item["source"]) != len(examples[i]["input_ids"]) or not torch.equal(
                item["source"], torch.tensor(examples[i]["input_ids"])))
    assert masked > ROWS // 2  # most pairs were masked: the comparison saw the formats at work
    batch = collator(examples[:8])
    for row in range(8):
        item = collator.draw(examples[row])
        n, m = len(item["source"]), len(item["target"])
        assert torch.equal(batch["input_ids"][row, :n], item["source"]) and batch["attention_mask"][row].sum() == n
        assert torch.equal(batch["labels"][row, :m], item["target"]) and (batch["labels"][row, m:] == IGNORE_INDEX).all()
        assert torch.equal(batch["decoder_input_ids"][row, :m],
                           torch.from_numpy(previous_output_tokens(item["target"].numpy(), tokenizer.eos_token_id)))


def test_the_denoising_collator_refuses_what_guided_denoising_refuses(collator_data):
    import copy

    from fairseq_maskplug.hf import DenoisingCollator

    _, tokenizer, examples = collator_data
    with pytest.raises(ValueError, match="<extra_id_0> is not in its vocabulary"):
        DenoisingCollator(tokenizer, "span", target_format="t5")
    with pytest.raises(ValueError, match="collapse 'off' contradicts it"):
        DenoisingCollator(tokenizer, "span", target_format="t5", collapse="off")
    with pytest.raises(ValueError, match="no 80/10/10"):
        DenoisingCollator(tokenizer, "span", target_format="t5", random_token_prob=0.1)
    with pytest.raises(ValueError, match="target_format must be one of"):
        DenoisingCollator(tokenizer, "span", target_format="bart")
    with pytest.raises(ValueError, match="learns from training"):
        DenoisingCollator(tokenizer, "ptw")
    with_mask, sentinels = copy.deepcopy(tokenizer), [f"<extra_id_{k}>" for k in range(100)]
    with_mask.add_tokens(sentinels, special_tokens=True)
    no_mask = transformers.PreTrainedTokenizerFast(tokenizer_object=copy.deepcopy(with_mask.backend_tokenizer),
                                                   bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                                   unk_token="<unk>")  # as T5's: sentinels, no <mask>
    assert no_mask.mask_token_id is None
    with pytest.raises(ValueError, match="no mask or pad token"):
        DenoisingCollator(no_mask, "span", target_format="masked")
    ours, theirs = (DenoisingCollator(t, "span", target_format="t5") for t in (no_mask, with_mask))
    sentinel_pairs = 0
    for example in examples[:20]:  # t5 needs no <mask>: the same pairs
        pair = ours.draw(example)
        assert all(torch.equal(pair[name], theirs.draw(example)[name]) for name in ("source", "target"))
        sentinel_pairs += int(len(pair["target"]) > 2)  # a run and its sentinel besides the closing ones
    assert sentinel_pairs > 0


def test_tokenized_lines_are_fairseqs_items_and_the_batch_has_hf_labels(collator_data):
    data, tokenizer, examples = collator_data
    dataset = fairseq_dataset(data, "random")
    for i in range(ROWS):  # what the collator is given is what fairseq blocks: <s> pieces </s>
        item = dataset[i]
        original = torch.where(item["target"].ne(1), item["target"], item["source"])
        assert examples[i]["input_ids"] == original.tolist()
    collator = PolicyCollator(tokenizer, "random", seed=7)
    batch = collator(examples[:8])
    assert batch["input_ids"].shape == batch["labels"].shape == batch["attention_mask"].shape
    lengths = [len(e["input_ids"]) for e in examples[:8]]
    assert batch["attention_mask"].sum(1).tolist() == lengths
    chosen = batch["labels"].ne(IGNORE_INDEX)
    assert chosen.any() and not (chosen & batch["attention_mask"].eq(0)).any()
    originals = [torch.tensor(e["input_ids"]) for e in examples[:8]]
    for row, ids in enumerate(originals):
        assert torch.equal(batch["labels"][row, :len(ids)][chosen[row, :len(ids)]], ids[chosen[row, :len(ids)]])


def test_a_missing_column_and_a_bad_epoch_are_refused(collator_data):
    _, tokenizer, examples = collator_data
    collator = PolicyCollator(tokenizer, "selective")
    with pytest.raises(KeyError, match="'importance'"):
        collator([{"input_ids": examples[0]["input_ids"]}])
    with pytest.raises(ValueError, match="has 2 values for"):
        collator([{"input_ids": examples[0]["input_ids"], "importance": [0.5, 0.5]}])
    with pytest.raises(ValueError, match="epoch must be >= 1"):
        collator.set_epoch(0)
    with pytest.raises(ValueError, match="unknown mask policy 'nope'"):
        PolicyCollator(tokenizer, "nope")


def test_a_tokenizer_of_other_pieces_is_refused_before_any_row(collator_data, sp_data, tmp_path):
    """A track aligned to one dictionary read for a tokenizer of another (rows whose lengths happen to agree
    were masked silently): track_column refuses it in one line, naming the first id that differs."""
    from fairseq_maskplug.interop.gpt2_vocab import read_dict_symbols
    from fairseq_maskplug.interop.tokenizer import sentencepiece_tokenizer

    data, tokenizer, _ = collator_data
    _, model, dict_path, _ = sp_data
    symbols = read_dict_symbols(dict_path)
    other_dict = tmp_path / "dict.txt"  # the same pieces, two of them swapped: same size, other ids
    rows = dict_path.read_text(encoding="utf-8").splitlines()
    rows[0], rows[1] = rows[1], rows[0]
    other_dict.write_text("\n".join(rows) + "\n", encoding="utf-8")
    other = sentencepiece_tokenizer(transformers, model, read_dict_symbols(other_dict), 512)
    with pytest.raises(ValueError, match=r"the tokenizer's id 4 is .* has .* there: the track is aligned to other"):
        track_column(str(data / "train"), "importance", tokenizer=other)
    smaller = sentencepiece_tokenizer(transformers, model, symbols, 512)
    smaller.add_tokens(["<extra>"])
    with pytest.raises(ValueError, match=r"the tokenizer has \d+ ids, the track's dictionary"):
        track_column(str(data / "train"), "importance", tokenizer=smaller)
    assert len(track_column(str(data / "train"), "importance", tokenizer=tokenizer)) == 560


@pytest.mark.full
@pytest.mark.parametrize("policy, views", [("selective", None), ("pmi", None), ("random", 4)])
def test_a_tiny_roberta_trains_with_the_trainer_and_the_collator(collator_data, policy, views, tmp_path):
    _, tokenizer, examples = collator_data
    config = transformers.RobertaConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1,
                                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=130,
                                        pad_token_id=tokenizer.pad_token_id, type_vocab_size=1)
    torch.manual_seed(0)
    model = transformers.RobertaForMaskedLM(config)
    collator = PolicyCollator(tokenizer, policy, seed=1, views=views)  # views: 16 examples make 64 rows
    result = train_twelve_steps(model, collator, examples[:96], 1e-3, tmp_path)  # it learns on the policy's positions
    assert collator.epoch == 2 and result.global_step == 12


def train_twelve_steps(model, collator, rows, learning_rate: float, out):
    """12 ``Trainer`` steps of 16 rows (two epochs of 96), every loss logged; asserts each is finite and the last
    three's mean below the first three's; the train result."""
    from fairseq_maskplug.hf import EpochCallback

    args = transformers.TrainingArguments(output_dir=str(out), per_device_train_batch_size=16, num_train_epochs=2,
                                          max_steps=12, learning_rate=learning_rate, logging_steps=1, report_to=[],
                                          use_cpu=True, save_strategy="no", remove_unused_columns=False,
                                          dataloader_num_workers=0)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=rows, data_collator=collator,
                                   callbacks=[EpochCallback(collator)])
    result = trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert len(losses) == 12 and all(np.isfinite(losses)), losses
    assert np.mean(losses[-3:]) < np.mean(losses[:3]), losses
    return result


@pytest.mark.full
@pytest.mark.parametrize("model_kind, target_format", [("bart", "masked"), ("bart", "full"), ("t5", "t5")])
def test_a_tiny_encoder_decoder_trains_with_the_denoising_collator(collator_data, model_kind, target_format, tmp_path):
    """A tiny ``BartForConditionalGeneration`` (fairseq's decoder inputs) and a tiny ``T5ForConditionalGeneration``
    (its own shift of the labels, ``decoder_input_ids=False``) train 12 steps under ``Trainer``, loss falling."""
    import copy

    from fairseq_maskplug.hf import DenoisingCollator

    _, tokenizer, examples = collator_data
    if model_kind == "t5":
        tokenizer = copy.deepcopy(tokenizer)
        tokenizer.add_tokens([f"<extra_id_{k}>" for k in range(100)], special_tokens=True)
        config = transformers.T5Config(vocab_size=len(tokenizer), d_model=32, d_kv=16, d_ff=64, num_layers=1,
                                       num_heads=2, pad_token_id=tokenizer.pad_token_id,
                                       eos_token_id=tokenizer.eos_token_id,
                                       decoder_start_token_id=tokenizer.pad_token_id)
        model_class = transformers.T5ForConditionalGeneration
    else:
        config = transformers.BartConfig(vocab_size=len(tokenizer), d_model=32, encoder_layers=1, decoder_layers=1,
                                         encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                                         decoder_ffn_dim=64, max_position_embeddings=130,
                                         pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                                         eos_token_id=tokenizer.eos_token_id,
                                         decoder_start_token_id=tokenizer.eos_token_id)
        model_class = transformers.BartForConditionalGeneration
    torch.manual_seed(0)
    model = model_class(config)
    collator = DenoisingCollator(tokenizer, "span", seed=1, target_format=target_format,
                                 decoder_input_ids=model_kind == "bart")
    train_twelve_steps(model, collator, examples[:96], 3e-3, tmp_path)


@pytest.mark.e2e
@pytest.mark.full  # about 20 s
def test_ptw_learns_the_hard_tag_through_the_feedback_trainer(collator_data, tmp_path):
    """PTW through Hugging Face: lines of sixteen fixed tokens (tags 0-15) with one token drawn from 30 in
    their middle (tag 16), as ``test_ptw``'s one-epoch fairseq run. After two epochs of 24 batches of 64 with
    ``PolicyTrainer``, the hard tag ranks highest in the collator's statistics, and drawn with them the
    collator predicts tag 16's positions more than 1.3 times as often as with the initial statistics (the same
    examples and seeds). Batches of 64 so that every tag is predicted in the first batch: PTW's scores start
    at 0 and move only for the tags a batch predicts, so a tag missing from the first batches falls below the
    mean and is seldom drawn again (with batches of 16, three tags, the hard one among them, stayed near 0)."""
    from fairseq_maskplug.hf import EpochCallback, PolicyTrainer

    _, tokenizer, _ = collator_data
    rng = np.random.default_rng(5)
    fixed, hard = list(range(10, 26)), list(range(30, 60))
    tags = np.array([0] + list(range(8)) + [16] + list(range(8, 16)) + [0], dtype=np.int64)
    examples = [{"input_ids": [0, *fixed[:8], int(rng.choice(hard)), *fixed[8:], 2], "pos": tags, "idx": i}
                for i in range(1500)]
    collator = PolicyCollator(tokenizer, "ptw", seed=3)
    config = transformers.RobertaConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1,
                                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=40,
                                        pad_token_id=tokenizer.pad_token_id, type_vocab_size=1)
    torch.manual_seed(0)
    args = transformers.TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=64, num_train_epochs=2,
                                          learning_rate=1e-3, report_to=[], use_cpu=True, save_strategy="no",
                                          remove_unused_columns=False, dataloader_num_workers=0, disable_tqdm=True)
    trainer = PolicyTrainer(model=transformers.RobertaForMaskedLM(config), args=args, train_dataset=examples,
                              data_collator=collator, callbacks=[EpochCallback(collator)])
    trainer.train()
    assert int(np.argmax(collator.state)) == 16 and np.all(np.isfinite(collator.state))

    def share_of_hard(state):
        fresh = PolicyCollator(tokenizer, "ptw", seed=3, draws="epoch")  # a generator per row: independent draws
        fresh.state = state
        chosen = sum(int(fresh.draw(e)["target"].ne(1)[9]) for e in examples[:600])
        return chosen / 600

    initial = PolicyCollator(tokenizer, "ptw").state
    assert share_of_hard(collator.state) > 1.3 * share_of_hard(initial)
    with pytest.raises(ValueError, match="must draw in the training process"):
        PolicyTrainer(model=trainer.model, train_dataset=examples, data_collator=collator,
                        args=transformers.TrainingArguments(output_dir=str(tmp_path), dataloader_num_workers=2,
                                                            report_to=[], use_cpu=True))


def bert_style_tokenizer(tmp_path):
    """A WordPiece tokenizer of BERT's kind ([CLS] ... [SEP], no <s>/</s>), made from a vocabulary file."""
    transformers = pytest.importorskip("transformers")
    words = [f"w{i}" for i in range(40)]
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    try:  # transformers 5 takes the vocabulary itself, 4 its file
        tokenizer = transformers.BertTokenizer(vocab={word: i for i, word in enumerate(vocab)})
    except TypeError:
        tokenizer = transformers.BertTokenizer(vocab_file=str(tmp_path / "vocab.txt"))
    assert len(tokenizer) == len(vocab)
    return tokenizer, words


def test_a_bert_style_tokenizers_cls_and_sep_are_never_chosen(tmp_path):
    """Issue 87, item 4: every special id of the tokenizer is unmaskable (its bos, eos and pad are None or [PAD]
    here), in one mask per example and in fe_mlm's views, with the random policy choosing 90% of the others."""
    tokenizer, words = bert_style_tokenizer(tmp_path)
    rng = np.random.default_rng(3)
    examples = [{"input_ids": tokenizer(" ".join(rng.choice(words, size=12)))["input_ids"], "idx": i}
                for i in range(200)]
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    assert all(e["input_ids"][0] == cls and e["input_ids"][-1] == sep for e in examples)
    for views in (None, 2):
        collator = PolicyCollator(tokenizer, "random", {"mask_prob": 0.9} if views is None else {"mask_prob": 0.45},
                                  seed=5, views=views)
        batch = collator(examples)
        chosen = batch["labels"].ne(IGNORE_INDEX)
        rows = batch["labels"].where(chosen, batch["input_ids"])  # the original ids
        assert not (chosen & (rows.eq(cls) | rows.eq(sep))).any()
        ordinary = ~(rows.eq(cls) | rows.eq(sep) | batch["attention_mask"].eq(0))
        assert chosen[ordinary].float().mean() > 0.3  # the others were chosen


def test_an_empty_row_is_refused_naming_it(collator_data):
    """Issue 87, item 7: an empty row is not turned into an all-padding example without a word."""
    from fairseq_maskplug.hf import DenoisingCollator

    _, tokenizer, examples = collator_data
    for collator in (PolicyCollator(tokenizer, "random"), DenoisingCollator(tokenizer, "random")):
        with pytest.raises(ValueError, match="row 7 has no tokens"):
            collator([examples[0], {"input_ids": [], "idx": 7}])


def test_an_option_the_policy_does_not_read_is_refused_and_mlm_probability_sets_its_rate(collator_data):
    """Issue 92, item 1: a misspelt option, transformers' name given as an option, another policy's option: each
    refused in one line naming the policy's options (they were ignored, masking at the default 15%);
    ``mlm_probability`` is the policy's rate, as its own option would set it."""
    _, tokenizer, examples = collator_data
    for policy, options, named in (("random", {"mlm_probability": 0.3}, "mlm_probability"),
                                   ("random", {"mask_prb": 0.5}, "mask_prb"),
                                   ("random", {"selective_cap": 0.2}, "selective_cap"),
                                   ("span", {"mask_prob": 0.3}, "mask_prob")):
        with pytest.raises(ValueError, match=f"mask policy '{policy}' reads no option '{named}' \\(its options: "):
            PolicyCollator(tokenizer, policy, options)
    by_rate = PolicyCollator(tokenizer, "random", seed=3, mlm_probability=0.4)(examples[:16])
    by_option = PolicyCollator(tokenizer, "random", {"mask_prob": 0.4}, seed=3)(examples[:16])
    assert torch.equal(by_rate["labels"], by_option["labels"]) and torch.equal(by_rate["input_ids"],
                                                                              by_option["input_ids"])
    with pytest.raises(ValueError, match="has no rate option"):
        PolicyCollator(tokenizer, "salient_span", mlm_probability=0.3)


def test_a_missing_column_names_the_trainer_setting_that_drops_it(collator_data):
    """Issue 92, item 3: Trainer's default remove_unused_columns=True drops the track columns and ``idx``; the
    collator's error (and its warning, for ``idx``) names the setting."""
    _, tokenizer, examples = collator_data
    with pytest.raises(KeyError, match="remove_unused_columns=False"):
        PolicyCollator(tokenizer, "selective")([{"input_ids": examples[0]["input_ids"]}])
    with pytest.warns(UserWarning, match="no 'idx' column.*remove_unused_columns=False"):
        PolicyCollator(tokenizer, "random")([{"input_ids": examples[0]["input_ids"]}])


def chosen_patterns(batch) -> list:
    """Each row's chosen positions, as a tuple (a mask pattern)."""
    return [tuple(np.flatnonzero(row)) for row in batch["labels"].ne(IGNORE_INDEX).numpy()]


def test_fresh_draws_differ_at_every_call_and_epoch_draws_wait_for_the_epoch(collator_data):
    """Issue 92, item 2: without a callback, a row's masks change from one call to the next (they stayed fixed
    until ``set_epoch``), with and without ``idx``; a second collator of the same seed repeats the sequence;
    ``draws="epoch"`` keeps fairseq's masks until the epoch changes. Half of each row's 10 or more maskable tokens
    are masked, so two independent draws of a row coincide with probability at most about 1/C(10, 5) = 1/252 (less
    where the counts differ): over 16 rows at most 2 coincidences has probability above 1 - 1e-4, where one mask
    repeated per row would give 16."""
    _, tokenizer, examples = collator_data
    rows = [e for e in examples if len(e["input_ids"]) >= 12][:16]
    plain = [{"input_ids": e["input_ids"]} for e in rows]
    half = {"mask_prob": 0.5}
    for given in (rows, plain):
        first, again = (PolicyCollator(tokenizer, "random", half, seed=4) for _ in range(2))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the rows without idx are numbered as seen: warned elsewhere
            calls = [chosen_patterns(first(given)) for _ in range(3)]
            assert calls == [chosen_patterns(again(given)) for _ in range(3)]  # the seed fixes the sequence
        for a, b in ((0, 1), (1, 2), (0, 2)):
            assert sum(x == y for x, y in zip(calls[a], calls[b])) <= 2, (a, b)
    epoch = PolicyCollator(tokenizer, "random", half, seed=4, draws="epoch")
    once, twice = chosen_patterns(epoch(rows)), chosen_patterns(epoch(rows))
    epoch.set_epoch(2)
    assert once == twice and sum(x == y for x, y in zip(once, chosen_patterns(epoch(rows)))) <= 2
    with pytest.raises(ValueError, match="draws must be one of 'fresh', 'epoch', got 'static'"):
        PolicyCollator(tokenizer, "random", draws="static")


@pytest.mark.parametrize("draws", ["fresh", "epoch"])
def test_two_dataloader_workers_never_repeat_a_draw_without_idx(collator_data, draws):
    """Issue 92, item 2: 64 copies of one line without ``idx`` through a DataLoader of two workers (each numbered
    its rows from 0 and drew what the other drew: 2 of 4 batch pairs were identical); at half the tokens masked,
    every row's mask differs from every other's, in two epochs of the loader for fresh draws."""
    _, tokenizer, examples = collator_data
    line = max(examples, key=lambda e: len(e["input_ids"]))["input_ids"]
    assert len(line) >= 30
    collator = PolicyCollator(tokenizer, "random", {"mask_prob": 0.5}, seed=2, draws=draws)
    loader = torch.utils.data.DataLoader([{"input_ids": line}] * 64, batch_size=8, num_workers=2,
                                         collate_fn=collator, generator=torch.Generator().manual_seed(0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        patterns = [p for _ in range(2 if draws == "fresh" else 1) for batch in loader for p in chosen_patterns(batch)]
    assert len(patterns) == 64 * (2 if draws == "fresh" else 1) and len(set(patterns)) == len(patterns)


def test_the_policy_trainer_keeps_the_track_columns_under_trainer_defaults(collator_data, tmp_path):
    """Issue 92, item 3: ``transformers.Trainer`` with its default ``remove_unused_columns=True`` drops the pmi
    column before the collator sees it (refused naming the setting); ``PolicyTrainer`` with the same arguments
    trains four steps of ``pmi`` with finite losses."""
    from fairseq_maskplug.hf import PolicyTrainer

    _, tokenizer, examples = collator_data
    config = transformers.RobertaConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1,
                                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=130,
                                        pad_token_id=tokenizer.pad_token_id, type_vocab_size=1)
    torch.manual_seed(0)
    args = transformers.TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=8, max_steps=4,
                                          logging_steps=1, report_to=[], use_cpu=True, save_strategy="no",
                                          disable_tqdm=True)
    assert args.remove_unused_columns  # the default this test is about
    collator = PolicyCollator(tokenizer, "pmi", seed=1)
    with pytest.raises(KeyError, match="pmi_units.*remove_unused_columns=False"):
        transformers.Trainer(model=transformers.RobertaForMaskedLM(config), args=args, train_dataset=examples[:32],
                             data_collator=collator).train()
    trainer = PolicyTrainer(model=transformers.RobertaForMaskedLM(config), args=args, train_dataset=examples[:32],
                            data_collator=collator)
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert len(losses) == 4 and all(np.isfinite(losses))


def test_importing_the_hf_side_leaves_the_scripts_logging_as_it_was():
    """Issue 92, item 7: importing fairseq ran ``logging.basicConfig(level=DEBUG)`` (fairseq.tasks.text_to_speech),
    so a Hugging Face script printed hydra's and datasets' DEBUG lines; after ``import fairseq_maskplug.hf`` and
    ``fairseq_maskplug.hf_tracks`` in a new process, the root logger has its default level and no handler."""
    import subprocess
    import sys

    script = ("import logging; import fairseq_maskplug.hf, fairseq_maskplug.hf_tracks, fairseq; "
              "root = logging.getLogger(); print(root.level, len(root.handlers))")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.split() == ["30", "0"], result.stdout + result.stderr[-2000:]
    assert "DEBUG" not in result.stderr and "tensorboardX" not in result.stderr, result.stderr[-2000:]

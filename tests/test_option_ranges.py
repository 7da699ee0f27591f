"""Every numeric option of every task, policy, criterion and command declares its range, and a
value outside it (or not finite) stops the real command with one line, before any work.

The tables below list the options by hand; the completeness tests fail when an option is added
without a range or without a row here."""

import argparse
import ast
import dataclasses
import importlib
import math

import pytest
from fairseq.criterions import CRITERION_DATACLASS_REGISTRY, CRITERION_REGISTRY
from fairseq.tasks import TASK_REGISTRY

from fairseq_helpers import BIN, CPU_RUN, REPO, TINY_BART, TINY_ROBERTA, run
from fairseq_maskplug.masking import MaskPolicy, register_mask_policy
from fairseq_maskplug.masking.registry import MASK_POLICY_DATACLASS_REGISTRY
from fairseq_maskplug.common.option_ranges import Interval, check_ranges, declared_range, number
from test_finetune_e2e import write_task

# option -> (task that reads it, arguments that make the task read it)
TRAIN_OPTIONS = {
    "tokens_per_sample": ("guided_mlm", []),
    "leave_unmasked_prob": ("guided_mlm", []),
    "random_token_prob": ("guided_denoising", []),
    "mask_prob": ("guided_mlm", []),
    "l3_mean": ("guided_mlm", ["--mask-policy", "l3"]),
    "l3_max_prob": ("guided_mlm", ["--mask-policy", "l3"]),
    "learned_max_length": ("guided_mlm", ["--mask-policy", "learned_span"]),
    "learned_spans": ("guided_mlm", ["--mask-policy", "learned_span"]),
    "learned_temperature": ("guided_denoising", ["--mask-policy", "learned_span"]),
    "salient_spans_per_block": ("guided_denoising", ["--mask-policy", "salient_span"]),
    "salient_fallback_prob": ("guided_denoising", ["--mask-policy", "salient_span", "--salient-fallback", "random"]),
    "selective_cap": ("selective_mlm", []),
    "selective_threshold": ("guided_mlm", ["--mask-policy", "selective"]),
    "span_geometric_p": ("guided_mlm", ["--mask-policy", "span"]),
    "span_max_length": ("guided_mlm", ["--mask-policy", "span"]),
    "span_mask_prob": ("guided_denoising", ["--mask-policy", "span"]),
    "pmi_mask_prob": ("guided_mlm", ["--mask-policy", "pmi"]),
    "ptw_mask_prob": ("guided_mlm", ["--mask-policy", "ptw"]),
    "ptw_momentum": ("guided_mlm", ["--mask-policy", "ptw"]),
    "ptw_sharpness": ("guided_mlm", ["--mask-policy", "ptw"]),
    "se_threshold": ("guided_mlm", ["--mask-policy", "self_evolution"]),
    "se_fallback_prob": ("guided_mlm", ["--mask-policy", "self_evolution"]),
    "se_max_share": ("guided_mlm", ["--mask-policy", "self_evolution"]),
    "se_smoothing": ("guided_mlm", ["--criterion", "self_evolution", "--tokens-per-sample", "32"]),  # a criterion option
    "difference_mask_prob": ("guided_mlm", ["--mask-policy", "difference"]),
    "difference_uniform_mix": ("guided_mlm", ["--mask-policy", "difference", "--difference-weighting", "rank"]),
    "mask_prob_schedule_start": ("guided_mlm", ["--mask-prob-schedule", "linear", "--mask-prob-schedule-updates", "4"]),
    "mask_prob_schedule_end": ("fe_mlm", ["--mask-policy", "random", "--mask-prob-schedule", "cosine",
                                          "--mask-prob-schedule-updates", "4"]),
    "mask_prob_schedule_updates": ("guided_mlm", ["--mask-prob-schedule", "linear"]),
    "t5_sentinels": ("guided_denoising", ["--target-format", "t5"]),
    "fe_views": ("fe_mlm", []),
    "num_classes": ("joint_mlm_classification", []),
    "mlm_weight": ("joint_mlm_classification", []),
    "tartan_meta_lr": ("joint_mlm_classification", ["--loss-weighting", "tartan"]),
    "tartan_dev_fit_size": ("joint_mlm_classification", ["--loss-weighting", "tartan"]),
    "tartan_dev_batch_size": ("joint_mlm_classification", ["--loss-weighting", "tartan"]),
    "tartan_dev_head_steps": ("joint_mlm_classification", ["--loss-weighting", "tartan"]),
    "tartan_dev_head_lr": ("joint_mlm_classification", ["--loss-weighting", "tartan"]),
    "tartan_dev_head_weight_decay": ("joint_mlm_classification", ["--loss-weighting", "tartan"]),
    "tlm_external_ratio": ("tlm", []),
    "tlm_task_mlm_weight": ("tlm", ["--tlm-external-ratio", "0"]),
    "answer_max_length": ("span_policy", []),
    "candidate_max_length": ("meta_span_policy", []),
    "meta_candidates": ("meta_span_policy", []),
    "meta_inner_lr": ("meta_span_policy", []),
    "meta_downstream_batch": ("meta_span_policy", []),
    "meta_fd_epsilon": ("meta_span_policy", ["--meta-gradient", "finite_difference"]),
    "positive_class_weight": ("token_importance", []),  # a criterion option
}

# (command, flag) -> arguments placed before it (a command's own parser reads them first)
COMMAND_OPTIONS = {
    ("fairseq-maskplug-evaluate", "--batch-size"): [],
    ("fairseq-maskplug-evaluate-mlm", "--mask-prob"): [],
    ("fairseq-maskplug-evaluate-mlm", "--seed"): [],
    ("fairseq-maskplug-prepare-demo", "--general-sentences"): [],
    ("fairseq-maskplug-prepare-demo", "--indomain-sentences"): [],
    ("fairseq-maskplug-prepare-demo", "--vocab-size"): [],
    ("fairseq-maskplug-prepare-demo", "--mr-sentences"): [],
    ("prepare_text", "--vocab-size"): [],
    ("prepare_text", "--workers"): [],
    ("fairseq-maskplug-prepare-demo", "--seed"): [],
    ("fairseq-maskplug-salient-spans", "--workers"): [],
    ("fairseq-maskplug-salient-spans", "--batch-size"): [],
    ("fairseq-maskplug-salient-spans", "--num-shards"): [],
    ("fairseq-maskplug-salient-spans", "--shard-id"): [],
    ("fairseq-maskplug-salient-spans", "--shard-block-lines"): [],
    ("fairseq-maskplug-salient-spans", "--spacy-max-length"): [],
    ("fairseq-maskplug-pos-tags", "--workers"): [],
    ("fairseq-maskplug-pos-tags", "--batch-size"): [],
    ("fairseq-maskplug-pos-tags", "--num-shards"): [],
    ("fairseq-maskplug-pos-tags", "--shard-id"): [],
    ("fairseq-maskplug-pos-tags", "--shard-block-lines"): [],
    ("fairseq-maskplug-pos-tags", "--spacy-max-length"): [],
    ("fairseq-maskplug-informask", "--rate"): [],
    ("fairseq-maskplug-informask", "--candidates"): [],
    ("fairseq-maskplug-informask", "--seed"): [],
    ("fairseq-maskplug-informask", "--window"): [],
    ("fairseq-maskplug-informask", "--num-shards"): [],
    ("fairseq-maskplug-informask", "--shard-id"): [],
    ("fairseq-maskplug-informask", "--shard-block-lines"): [],
    ("fairseq-maskplug-difference", "--anchors"): [],
    ("fairseq-maskplug-difference", "--num-shards"): [],
    ("fairseq-maskplug-difference", "--shard-id"): [],
    ("fairseq-maskplug-difference", "--shard-block-lines"): [],
    ("prepare_tlm_data", "--group"): [],
    ("prepare_tlm_data", "--seed"): [],
    ("fairseq-maskplug-retrieve", "--top-k"): [],
    ("fairseq-maskplug-retrieve", "--k1"): [],
    ("fairseq-maskplug-retrieve", "--b"): [],
    ("fairseq-maskplug-retrieve", "--chunk-docs"): [],
    ("fairseq-maskplug-retrieve", "--workers"): [],
    ("fairseq-maskplug-retrieve", "--corpus-shards"): [],
    ("fairseq-maskplug-retrieve", "--num-shards"): ["--queries", "Q", "--out", "O"],
    ("fairseq-maskplug-retrieve", "--build-shard"): [],
    ("fairseq-maskplug-retrieve", "--shard-id"): ["--queries", "Q", "--out", "O"],
    ("fairseq-maskplug-select", "--num-docs"): [],
    ("fairseq-maskplug-select", "--buckets"): [],
    ("fairseq-maskplug-select", "--ngrams"): [],
    ("fairseq-maskplug-select", "--min-words"): [],
    ("fairseq-maskplug-select", "--seed"): [],
    ("fairseq-maskplug-select", "--num-shards"): [],
    ("fairseq-maskplug-select", "--shard-id"): [],
    ("fairseq-maskplug-pmi-units", "--lexicon-size"): [],
    ("fairseq-maskplug-pmi-units", "--min-count"): [],
    ("fairseq-maskplug-pmi-units", "--max-ngrams"): [],
    ("fairseq-maskplug-pmi-units", "--seed"): [],
    ("fairseq-maskplug-pmi-units", "--num-shards"): [],
    ("fairseq-maskplug-pmi-units", "--shard-id"): [],
    ("fairseq-maskplug-pmi-units", "--shard-block-lines"): [],
    ("fairseq-maskplug-score-pll", "--max-tokens"): [],
    ("fairseq-maskplug-score-pll", "--num-shards"): [],
    ("fairseq-maskplug-score-pll", "--shard-id"): [],
    ("fairseq-maskplug-score-pll", "--shard-block-lines"): [],
    ("fairseq-maskplug-annotate-importance", "--max-tokens"): [],
    ("fairseq-maskplug-annotate-importance", "--preview-lines"): [],
    ("fairseq-maskplug-annotate-importance", "--num-shards"): [],
    ("fairseq-maskplug-annotate-importance", "--shard-id"): [],
    ("fairseq-maskplug-annotate-importance", "--shard-block-lines"): [],
    ("fairseq-maskplug-score-importance", "--delta"): [],
    ("fairseq-maskplug-score-importance", "--batch-size"): [],
    ("fairseq-maskplug-score-importance", "--max-tokens"): [],
    ("fairseq-maskplug-score-importance", "--num-shards"): [],
    ("fairseq-maskplug-score-importance", "--shard-id"): [],
    ("fairseq-maskplug-score-importance", "--shard-block-lines"): [],
    ("prepare_bart_data", "--sentences"): [],
    ("prepare_bart_data", "--heldout"): [],
    ("prepare_bart_data", "--seen"): [],
    ("prepare_bart_data", "--probe-train"): [],
    ("prepare_bart_data", "--probe-valid"): [],
    ("prepare_bart_data", "--max-question-tokens"): [],
    ("prepare_bart_data", "--workers"): [],
    ("fairseq-maskplug-score-spans", "--max-tokens"): [],
    ("fairseq-maskplug-score-spans", "--max-length"): [],
    ("fairseq-maskplug-score-spans", "--preview-lines"): [],
    ("fairseq-maskplug-score-spans", "--num-shards"): [],
    ("fairseq-maskplug-score-spans", "--shard-id"): [],
    ("fairseq-maskplug-score-spans", "--shard-block-lines"): [],
    ("fairseq-maskplug-convert", "--tolerance"): [],
    ("fairseq-maskplug-show-examples", "-n"): ["DATA"],
    ("fairseq-maskplug-show-examples", "--epoch"): ["DATA"],
}

#: where the shard options of the producers are defined (tools.sharding.add_shard_options)
SHARD_OPTIONS = "fairseq_maskplug/tools/sharding.py"
#: options of that file a command does not take (retrieve shards its queries, select its documents: not lines
#: in blocks)
NOT_TAKEN = {("fairseq-maskplug-retrieve", "--shard-block-lines"), ("fairseq-maskplug-select", "--shard-block-lines")}

#: the source file(s) of each command (the modules without a console script run with python -m)
COMMAND_SOURCES = {
    "fairseq-maskplug-evaluate": "fairseq_maskplug/evaluation/evaluate.py",
    "fairseq-maskplug-evaluate-mlm": "fairseq_maskplug/evaluation/evaluate_mlm.py",
    "fairseq-maskplug-prepare-demo": ("preprocess/prepare_demo.py", "fairseq_maskplug/demo/__init__.py"),
    "fairseq-maskplug-salient-spans": ("preprocess/salient_spans.py", SHARD_OPTIONS),
    "fairseq-maskplug-pos-tags": ("preprocess/pos_tags.py", SHARD_OPTIONS),
    "fairseq-maskplug-informask": ("preprocess/informask.py", SHARD_OPTIONS),
    "fairseq-maskplug-difference": ("preprocess/difference.py", SHARD_OPTIONS),
    "prepare_tlm_data": "fairseq_maskplug/demo/tlm_data.py",
    "prepare_text": "preprocess/prepare_text.py",
    "fairseq-maskplug-retrieve": ("preprocess/retrieve.py", SHARD_OPTIONS),
    "fairseq-maskplug-select": ("preprocess/select_dsir.py", SHARD_OPTIONS),
    "fairseq-maskplug-pmi-units": ("preprocess/pmi_units.py", SHARD_OPTIONS),
    "fairseq-maskplug-score-pll": ("preprocess/score_pll.py", SHARD_OPTIONS),
    "fairseq-maskplug-annotate-importance": ("preprocess/annotate_importance.py", SHARD_OPTIONS),
    "fairseq-maskplug-score-importance": ("preprocess/score_importance.py", SHARD_OPTIONS),
    "prepare_bart_data": "fairseq_maskplug/demo/bart_data.py",
    "fairseq-maskplug-score-spans": ("preprocess/score_spans.py", SHARD_OPTIONS),
    "fairseq-maskplug-convert": "preprocess/convert.py",
    "fairseq-maskplug-show-examples": "preprocess/show_examples.py",
}


def bad_values(interval: Interval, kind: type):
    """Values just outside ``interval``: below and above each finite end (at an open end, the
    end itself), and for floats nan and inf."""
    step = 1 if kind is int else 0.5
    values = []
    if math.isfinite(interval.low):
        values.append(interval.low - step if interval.low_closed else interval.low)
    if math.isfinite(interval.high):
        values.append(interval.high + step if interval.high_closed else interval.high)
    if kind is float:
        values += [math.nan, math.inf]
    return [kind(v) if math.isfinite(v) else v for v in values]


def numeric_fields(dataclass: type):
    return [f for f in dataclasses.fields(dataclass) if f.type in (int, float)]


def package_option_dataclasses():
    """``(kind, name, dataclass)`` of every registered task, policy and criterion of the package."""
    out = [("policy", name, dc) for name, dc in MASK_POLICY_DATACLASS_REGISTRY.items() if dc is not None]
    out += [("task", name, getattr(cls, "__dataclass")) for name, cls in TASK_REGISTRY.items()
            if cls.__module__.startswith("fairseq_maskplug")]
    out += [("criterion", name, CRITERION_DATACLASS_REGISTRY[name]) for name, cls in CRITERION_REGISTRY.items()
            if cls.__module__.startswith("fairseq_maskplug") and name in CRITERION_DATACLASS_REGISTRY]
    return out


def declared_options():
    """Every numeric option of the package's tasks, policies and criteria -> (field, dataclass);
    fairseq's own options that a task copies by interpolation (``seed: int = II("common.seed")``) aside."""
    options = {}
    for _, _, dc in package_option_dataclasses():
        for f in numeric_fields(dc):
            if isinstance(f.default, str) and f.default.startswith("${"):
                continue
            options.setdefault(f.name, (f, dc))
    return options


def command_numeric_options():
    """``(command, flag) -> (interval text, int or float)`` of every ``add_argument(...,
    type=number(...))`` in the commands' sources; ``type=int`` / ``type=float`` (no range) is
    reported as ``None``."""
    found = {}
    for command, sources in COMMAND_SOURCES.items():
        sources = (sources,) if isinstance(sources, str) else sources
        for node in (n for source in sources for n in ast.walk(ast.parse((REPO / source).read_text()))):
            if not (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument"):
                continue
            if not isinstance(node.args[0], ast.Constant):  # tools.cli.add_dataclass_options: ranges in the dataclass
                continue
            kind = next((k.value for k in node.keywords if k.arg == "type"), None)
            flag = node.args[0].value
            if isinstance(kind, ast.Name) and kind.id in ("int", "float"):
                found[(command, flag)] = None
            elif isinstance(kind, ast.Call) and getattr(kind.func, "id", None) == "number":
                number_kind = kind.args[1].id if len(kind.args) > 1 else "float"
                found[(command, flag)] = (kind.args[0].value, {"int": int, "float": float}[number_kind])
        found.update(producer_numeric_options(command, sources[0]))
    return {key: value for key, value in found.items() if key not in NOT_TAKEN}


def producer_numeric_options(command: str, source: str) -> dict:
    """``(command, flag) -> (interval text, int or float)`` (None without a range) of the numeric fields of the
    options dataclass of a command declared as a ``TokenProducer`` (its module's ``PRODUCER``)."""
    from fairseq_maskplug.common.option_ranges import flag

    module = importlib.import_module(source[:-len(".py")].replace("/", "."))
    producer = getattr(module, "PRODUCER", None)
    if producer is None:
        return {}
    return {(command, flag(f.name)): (f.metadata["range"], f.type) if "range" in f.metadata else None
            for f in numeric_fields(producer.options)}


# ---------------------------------------------------------------- the notation and the checker


def test_intervals_parse_print_and_hold_only_finite_numbers():
    unit = Interval.parse("(0, 1]")
    assert str(unit) == "(0, 1]" and 0.5 in unit and 1 in unit
    assert 0 not in unit and 1.5 not in unit and math.nan not in unit
    counts = Interval.parse("[1, inf]")  # an infinite end is open, whatever the bracket says
    assert str(counts) == "[1, inf)" and 10**9 in counts and math.inf not in counts and 0 not in counts
    assert str(Interval.parse("[-1, 1)")) == "[-1, 1)"
    for text in ("0, 1", "(1, 0)", "[a, 1]", "(0; 1]"):
        with pytest.raises(ValueError, match="interval"):
            Interval.parse(text)


def test_number_is_an_argparse_type_with_one_line_refusals(capsys):
    parser = argparse.ArgumentParser(prog="tool")
    parser.add_argument("--k", type=number("[1, inf)", int), default=3)
    parser.add_argument("--p", type=number("(0, 1]"), default=0.5)
    assert vars(parser.parse_args(["--k", "7", "--p", "1"])) == {"k": 7, "p": 1.0}
    for argv, message in ((["--k", "0"], "argument --k: must lie in [1, inf), got 0"),
                          (["--k", "2.5"], "argument --k: '2.5' is not an integer"),
                          (["--p", "nan"], "argument --p: must lie in (0, 1], got nan"),
                          (["--p", "inf"], "argument --p: must lie in (0, 1], got inf")):
        with pytest.raises(SystemExit):
            parser.parse_args(argv)
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1] == f"tool: error: {message}", err


def test_check_ranges_names_the_flag_and_refuses_non_finite_floats_without_a_range():
    @dataclasses.dataclass
    class Options:
        rate: float = dataclasses.field(default=0.1, metadata={"help": "h", "range": "(0, 1]"})
        weight: float = dataclasses.field(default=1.0, metadata={"help": "h"})
        name: str = "x"

    check_ranges(Options(), Options)
    check_ranges(argparse.Namespace(rate=0.5), Options)  # fields the config lacks are skipped
    with pytest.raises(ValueError, match=r"^--rate must lie in \(0, 1\], got 0$"):
        check_ranges(Options(rate=0), Options)
    with pytest.raises(ValueError, match="^--weight must be a finite number, got inf$"):
        check_ranges(Options(weight=math.inf), Options)


def test_a_policy_built_with_an_option_out_of_range_is_refused_and_a_bad_range_cannot_register():
    from fairseq_maskplug.masking.builtin_policies import RandomPolicy, RandomPolicyOptions
    from fairseq_maskplug.masking.spans import SpanPolicy, SpanPolicyOptions

    RandomPolicy(RandomPolicyOptions(mask_prob=1.0))
    with pytest.raises(ValueError, match=r"^--mask-prob must lie in \(0, 1\], got 0$"):
        RandomPolicy(RandomPolicyOptions(mask_prob=0))  # built directly, not through the registry
    with pytest.raises(ValueError, match=r"^--span-max-length must lie in \[1, inf\), got 0$"):
        SpanPolicy(SpanPolicyOptions(span_max_length=0))
    with pytest.raises(TypeError, match="is built from a RandomPolicyOptions, got Namespace"):
        RandomPolicy(argparse.Namespace(mask_prob=0.2))  # a configuration goes through build_mask_policy

    @dataclasses.dataclass
    class Broken:
        broken_test_share: float = dataclasses.field(default=0.5, metadata={"help": "h", "range": "0..1"})

    with pytest.raises(ValueError, match="metadata\\['range'\\] '0..1' is not an interval"):
        register_mask_policy("broken_test_policy", dataclass=Broken)(type("Broken", (MaskPolicy,), {}))
    assert "broken_test_policy" not in MASK_POLICY_DATACLASS_REGISTRY


def test_a_word_option_s_choices_are_declared_once_and_a_value_outside_them_is_refused_in_one_line():
    from fairseq_maskplug.common.option_ranges import option
    from fairseq_maskplug.masking.salient import SalientSpanOptions, SalientSpanPolicy
    from fairseq_maskplug.masking.l3 import L3Policy, L3PolicyOptions

    @dataclasses.dataclass
    class Options:
        scope: str = option("block", "where", choices=("block", "sentence"))

    check_ranges(Options(scope="sentence"), Options)
    with pytest.raises(ValueError, match=r"^--scope must be one of \('block', 'sentence'\), got 'line'$"):
        check_ranges(Options(scope="line"), Options)
    with pytest.raises(ValueError, match=r"^default 'line' is not one of its choices \('block',\)$"):
        option("line", "where", choices=("block",))
    # a policy's word options: refused when the policy is built, naming the flag
    with pytest.raises(ValueError, match=r"^--salient-scope must be one of \('block', 'sentence'\), got 'line'$"):
        SalientSpanPolicy(SalientSpanOptions(salient_scope="line"))
    with pytest.raises(ValueError, match=r"^--l3-redistribute must be one of"):
        L3Policy(L3PolicyOptions(l3_redistribute="some"))


def test_every_word_option_s_default_is_one_of_its_choices():
    declared = [(name, f) for _, name, dc in package_option_dataclasses() for f in dataclasses.fields(dc)
                if "choices" in f.metadata]
    assert len(declared) >= 8, declared  # salient (2), selective (2), l3 (2), self_evolution, difference
    assert all(f.default in f.metadata["choices"] for _, f in declared)


# ---------------------------------------------------------------- completeness of the declarations


def test_every_numeric_option_declares_a_range_that_holds_its_default():
    missing, bad_default = [], []
    for kind, name, dc in package_option_dataclasses():
        for f in numeric_fields(dc):
            if isinstance(f.default, str) and f.default.startswith("${"):
                continue  # fairseq's own option (common.seed), interpolated
            interval = declared_range(f)
            if interval is None:
                missing.append(f"{kind} {name}: {f.name}")
            elif f.default not in interval:
                bad_default.append(f"{kind} {name}: {f.name}={f.default} not in {interval}")
    assert not missing, "add metadata={'range': ...} to " + ", ".join(missing)
    assert not bad_default, bad_default


def test_every_numeric_option_has_a_row_in_the_tables():
    assert set(TRAIN_OPTIONS) == set(declared_options())
    found = command_numeric_options()
    unranged = [key for key, interval in found.items() if interval is None]
    assert not unranged, f"use type=number('[low, high]', int) for {unranged}"
    assert set(COMMAND_OPTIONS) == set(found)


def test_every_value_outside_a_declared_range_is_refused_by_the_checker():
    for name, (f, dc) in declared_options().items():
        interval = declared_range(f)
        for value in bad_values(interval, f.type):
            config = argparse.Namespace(**{name: value})
            with pytest.raises(ValueError, match=f"^--{name.replace('_', '-')} must lie in "):
                check_ranges(config, dc)


# ---------------------------------------------------------------- the real commands


@pytest.fixture(scope="module")
def task_data(tiny_data, tmp_path_factory):
    return write_task(tiny_data, tmp_path_factory.mktemp("task"))


@pytest.mark.e2e
@pytest.mark.parametrize("option", sorted(TRAIN_OPTIONS))
def test_fairseq_maskplug_train_refuses_an_option_out_of_range_before_any_work(option, tiny_data, task_data,
                                                                                tmp_path):
    task, activating = TRAIN_OPTIONS[option]
    f, _ = declared_options()[option]
    interval = declared_range(f)
    data, extra = tiny_data / "bin", []
    if task in ("joint_mlm_classification", "tlm"):
        data = task_data
    if task == "tlm" and option != "tlm_external_ratio":
        extra = ["--tlm-external-ratio", "0"]
    if task == "meta_span_policy":
        extra = ["--downstream-data", tmp_path / "downstream", "--seq2seq-checkpoint", tmp_path / "bart.pt"]
    if task == "token_importance":
        extra = ["--criterion", "token_importance"]
    model = TINY_BART if task == "guided_denoising" else TINY_ROBERTA
    for value in bad_values(interval, f.type)[:2]:
        result = run([BIN / "fairseq-maskplug-train", data, "--task", task, *model, *activating, *extra,
                      f"--{option.replace('_', '-')}", str(value), "--save-dir", tmp_path / "ck", *CPU_RUN,
                      "--max-update", "1"])
        assert result.returncode == 2, result.stderr[-3000:]
        errors = [line for line in result.stderr.splitlines() if "error:" in line]
        assert errors == [f"fairseq-maskplug-train: error: --{option.replace('_', '-')} must lie in {interval}, "
                          f"got {value}"], result.stderr[-3000:]
        assert not (tmp_path / "ck").exists() or not any((tmp_path / "ck").glob("*.pt"))


@pytest.mark.parametrize("command,flag", sorted(COMMAND_OPTIONS))
def test_commands_refuse_an_option_out_of_range_in_one_line(command, flag, capsys):
    interval_text, kind = command_numeric_options()[(command, flag)]
    interval = Interval.parse(interval_text)
    for value in bad_values(interval, kind)[:2]:
        args = [*COMMAND_OPTIONS[(command, flag)], flag, str(value)]
        if command.startswith("fairseq-"):
            result = run([BIN / command, *args])  # the console script's entry point, in this process
            code, err = result.returncode, result.stderr
        else:  # python -m preprocess.<command>
            with pytest.raises(SystemExit) as exited:
                importlib.import_module(f"preprocess.{command}").main(args)
            code, err = exited.value.code, capsys.readouterr().err
        assert code == 2, (command, flag, err[-2000:])
        errors = [line for line in err.splitlines() if "error:" in line]
        assert len(errors) == 1 and errors[0].endswith(
            f"error: argument {flag}: must lie in {interval}, got {value}"), err[-2000:]


@pytest.mark.e2e
def test_tokens_per_sample_must_leave_text_beside_the_framing_tokens(tiny_data, tmp_path):
    """BART items are framed by <s> and </s>: --tokens-per-sample 2 left nothing (a ZeroDivisionError)."""
    result = run([BIN / "fairseq-maskplug-train", tiny_data / "bin", "--task", "guided_denoising", *TINY_BART,
                  "--tokens-per-sample", "2", "--save-dir", tmp_path / "ck", *CPU_RUN, "--max-update", "1"])
    assert result.returncode == 2, result.stderr[-3000:]
    assert [line for line in result.stderr.splitlines() if "error:" in line] == [
        "fairseq-maskplug-train: error: --tokens-per-sample 2 leaves no text beside the 2 framing token(s) of "
        "each item: give at least 3"]


@pytest.mark.e2e
@pytest.mark.parametrize("extra,message", [
    (["--shorten-method", "truncate", "--shorten-data-split-list", "train,vaild"],
     "--shorten-data-split-list names vaild: no such split in "),
    (["--shorten-data-split-list", "train"], "--shorten-data-split-list applies to --shorten-method truncate or "
                                             "random_crop"),
])
def test_shorten_data_split_list_names_splits_that_are_shortened(tiny_data, tmp_path, extra, message):
    """fairseq ignores an unknown split name (a typo left the split unshortened) and the list without a method."""
    result = run([BIN / "fairseq-maskplug-train", tiny_data / "bin", "--task", "guided_mlm", *TINY_ROBERTA, *extra,
                  "--save-dir", tmp_path / "ck", *CPU_RUN, "--max-update", "1"])
    assert result.returncode == 2, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and message in errors[0], result.stderr[-3000:]


def test_option_declares_help_and_range_and_refuses_a_malformed_range_where_it_is_declared():
    from fairseq_maskplug.common.option_ranges import option

    declared = option(0.5, "a share", range="(0, 1]", argparse_alias="--share")
    assert declared.default == 0.5 and dict(declared.metadata) == {"help": "a share", "range": "(0, 1]",
                                                                   "argparse_alias": "--share"}
    assert "range" not in option("x", "a name").metadata
    with pytest.raises(ValueError, match=r"^'\(0, 1' is not an interval"):
        option(0.5, "a share", range="(0, 1")


def test_a_dataclass_of_options_becomes_command_line_options_with_their_ranges_and_sources(capsys):
    from fairseq_maskplug.common.option_ranges import option
    from fairseq_maskplug.tools.cli import HelpFormatter, add_dataclass_options

    @dataclasses.dataclass
    class Options:
        min_count: int = option(5, "rarest kept", range="[1, inf)", source="paper")
        rate: float = option(0.5, "share", range="(0, 1]")
        label: str = option("x", "a name", choices=["x", "y"])
        keep: bool = option(True, "keep it")

    parser = argparse.ArgumentParser(prog="tool", formatter_class=HelpFormatter)
    add_dataclass_options(parser, Options)
    assert vars(parser.parse_args([])) == {"min_count": 5, "rate": 0.5, "label": "x", "keep": True}
    assert vars(parser.parse_args(["--min-count", "2", "--rate", "1", "--label", "y", "--no-keep"])) == {
        "min_count": 2, "rate": 1.0, "label": "y", "keep": False}
    assert "rarest kept (paper) (default: 5)" in " ".join(parser.format_help().split())
    with pytest.raises(SystemExit):
        parser.parse_args(["--rate", "0"])
    assert capsys.readouterr().err.strip().splitlines()[-1] == "tool: error: argument --rate: must lie in (0, 1], got 0"
    with pytest.raises(SystemExit):
        parser.parse_args(["--label", "z"])
    assert "argument --label: invalid choice: 'z' (choose from" in capsys.readouterr().err

    @dataclasses.dataclass
    class Listed:
        items: list = dataclasses.field(default_factory=list, metadata={"help": "h"})

    with pytest.raises(TypeError, match="Listed.items: an option is an int, float, str or bool"):
        add_dataclass_options(argparse.ArgumentParser(), Listed)

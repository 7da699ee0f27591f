"""The health of a comparison's units (fairseq_maskplug/compare/health.py): the thresholds on records, the mask rate
read from fairseq's JSON log lines, the task's classes from its label dictionary, and the report's warnings."""

import json

from fairseq_maskplug.compare import health
from fairseq_maskplug.compare.report import markdown


def record(row, seed, rate, predicted=5, classes=5, warnings=()):
    return {"row": row, "seed": seed, "mask_rate": rate, "classes": classes, "classes_predicted": predicted,
            "warnings": list(warnings)}


def test_an_arm_under_a_third_of_its_baselines_rate_in_a_seed_fails_and_one_above_does_not():
    records = health.problems([record("random", 1, 0.15), record("selective", 1, 0.006),
                               record("random", 2, 0.15), record("selective", 2, 0.051)], "random")
    assert [bool(r["problems"]) for r in records] == [False, True, False, False]
    assert records[1]["problems"] == ["masked 0.6% of tokens against 15.0% (the baseline's), under a third"]


def test_without_a_pretraining_baseline_the_seeds_largest_rate_is_the_reference():
    records = health.problems([record("none", 1, None), record("random", 1, 0.15), record("selective", 1, 0.04)],
                              "none")
    assert [bool(r["problems"]) for r in records] == [False, False, True]


def test_classifiers_short_of_the_tasks_classes_and_degenerate_tracks_fail():
    records = health.problems([record("a", 1, None, predicted=3), record("b", 1, None, predicted=5),
                               record("c", 1, None, predicted=2, classes=None), record("d", 1, None, warnings=["x"])],
                              "a")
    assert records[0]["problems"] == ["its classifier predicted 3 of the task's 5 classes"]
    assert not records[1]["problems"] and not records[2]["problems"]
    assert records[3]["problems"] == ["degenerate track: x"]


def test_the_mask_rate_is_read_from_fairseqs_json_log_lines(tmp_path):
    log = tmp_path / "pretrain.log"
    log.write_text("\n".join([
        '2026-12-02 | INFO | train_inner | {"epoch": 1, "update": 1.5, "loss": "9", "mask_rate": "0.1"}',
        '2026-12-02 | INFO | train | {"epoch": 1, "train_loss": "9", "train_mask_rate": "0.14"}',
        '2026-12-02 | INFO | train | {"epoch": 2, "train_loss": "8", "train_mask_rate": "0.16"}',
        "a line that is not a record"]) + "\n")
    assert abs(health.mask_rate(log) - 0.15) < 1e-12
    log.write_text('x | train_inner | {"mask_rate": "0.2"}\n')
    assert health.mask_rate(log) == 0.2
    assert health.mask_rate(tmp_path / "none.log") is None


def test_a_policy_s_own_units_rate_is_read_and_shown_beside_the_tokens(tmp_path):
    """Issue 106, item 5: where a policy masks units of several tokens (whole words, PMI n-grams, spans), the
    health gives the share of its units chosen (``unit_mask_rate``, logged by the MLM tasks) beside the tokens'."""
    from fairseq_maskplug.compare.report import health_lines

    log = tmp_path / "pretrain.log"
    log.write_text('2026-12-07 | INFO | train | {"epoch": 1, "train_mask_rate": "0.15", "train_unit_mask_rate": '
                   '"0.12"}\n2026-12-07 | INFO | train | {"epoch": 2, "train_mask_rate": "0.15", '
                   '"train_unit_mask_rate": "0.14"}\n')
    assert abs(health.mask_rate(log, "unit_mask_rate") - 0.13) < 1e-12
    words, tokens = dict(record("pmi", 1, 0.15), unit_mask_rate=0.13), dict(record("random", 1, 0.15),
                                                                            unit_mask_rate=None)
    lines = health_lines({"health": health.problems([words, tokens], "random")})
    assert "| pmi | 1 | 15.0% (13.0% of units) |" in lines[2] and "| random | 1 | 15.0% |" in lines[3], lines


def test_the_tasks_classes_leave_out_fairseqs_filler_words(tmp_path):
    (tmp_path / "label").mkdir()
    (tmp_path / "label" / "dict.txt").write_text("pos 10\nneg 9\nmadeupword0000 0\n")
    assert health.task_classes(tmp_path) == 2
    assert health.task_classes(tmp_path / "nosuch") is None


def test_degenerate_lines_are_collected_once(tmp_path):
    line = "2026 | WARNING | side information x.bin: every token has the value 0: a policy reading it masks as if it had " \
           "no information; check the producer's input and options (expected at toy size? set X=1)"
    (tmp_path / "a.log").write_text(line + "\n" + line + "\n")
    found = health.degenerate_lines([tmp_path / "a.log", tmp_path / "missing.log"])
    assert len(found) == 1 and found[0].startswith("side information x.bin")


def stored(scores, health_records, seeds):
    meta = {"kind": "comparison", "plan": "p.toml", "name": "p", "baseline": "random", "splits": ["test"],
            "compared": ["test"], "seeds": [str(s) for s in seeds],
            "arms": [{"name": "random", "task": "guided_mlm"}, {"name": "selective", "task": "guided_mlm"}]}
    return {"meta": meta, "scores": scores, "health": health_records, "missing": []}


def test_the_report_warns_before_its_tables_and_marks_the_failed_arm_seed():
    scores = [{"row": row, "seed": seed, "split": "test", "accuracy": 50.0, "macro_f1": None, "n": 40,
               "classes_predicted": 2, "correct": ("1" * 20 + "0" * 20) if row == "random" else ("0" * 20 + "1" * 20)}
              for row in ("random", "selective") for seed in (1, 2)]
    records = health.problems([record("random", 1, 0.15, 2, 2), record("selective", 1, 0.006, 2, 2),
                               record("random", 2, 0.15, 2, 2), record("selective", 2, 0.15, 2, 2)], "random")
    text = markdown(stored(scores, records, [1, 2]))
    verdict = text.index("- selective − random (test): no difference shown")
    assert verdict < text.index("Only 2 seeds") < text.index("| arm | seed |")
    assert "1 arm-seed(s) did not measure what their arm is for (selective: seed 1)" in text
    assert "| selective | 2 | 50.0 ± 0.0 | fails in seed 1 |" in text
    # 2 seeds x 40 items: the rule would need more than the score's whole range; said so, never "excludes 203 points"
    assert "This design cannot see a difference of 2 points, the plan's effect of interest: 1 of its 1 comparison(s)" \
        in text
    assert "finds no difference inside the score's range" in text and "nothing inside the score's range" in text
    assert json.dumps(records)  # the records are stored as they are


def test_the_cannot_see_warning_reads_the_plan_s_own_effect_of_interest():
    """Issue 101: the warning fires exactly when a comparison's detectable difference exceeds ``[report] effect``
    (not a fixed fifth of the range): 5 seeds x 400 items whose arms differ by item noise find about 5 points, so an
    effect of 2 warns, naming the comparison and its figure, and an effect above the detectable difference does not."""
    import numpy as np

    from fairseq_maskplug.compare.report import comparisons_of

    rng = np.random.default_rng(3)
    scores = []
    for seed in (1, 2, 3, 4, 5):
        for row, share in (("random", 0.6), ("selective", 0.6 + rng.normal(0, 0.02))):
            right = rng.random(400) < share
            scores.append({"row": row, "seed": seed, "split": "test", "accuracy": 100 * right.mean(),
                           "macro_f1": None, "n": 400, "classes_predicted": 2,
                           "correct": "".join("1" if r else "0" for r in right)})
    data = stored(scores, [], [1, 2, 3, 4, 5])
    detectable = comparisons_of(data)[0].detectable
    assert 2 < detectable < 20, detectable  # between the effect and the old fixed threshold: the case that changed
    for effect, warned in ((2.0, True), (detectable - 0.01, True), (detectable + 0.01, False), (25.0, False)):
        data["meta"]["effect"] = effect
        text = markdown(data)
        assert ("This design cannot see a difference of" in text) is warned, (effect, detectable)
        if warned:
            assert f"selective − random on test: {detectable:.1f}" in text


def test_a_producers_tagger_quality_is_its_best_valid_f1(tmp_path):
    log = tmp_path / "seed1.3.log"
    log.write_text('x | valid | {"epoch": 1, "valid_loss": "1", "valid_f1": "12.5"}\n'
                   'x | valid | {"epoch": 2, "valid_loss": "1", "valid_f1": "31.25"}\n'
                   'x | train | {"epoch": 2, "train_loss": "1"}\n')
    assert health.best_valid_f1(log) == 31.25
    assert health.best_valid_f1(tmp_path / "none.log") is None


def test_a_stage_reads_the_splits_dictionaries_and_only_the_tracks_its_command_names():
    from fairseq_maskplug.compare.records import read_by

    words = ["--mask-policy", "selective", "--selective-track", "importance_s1"]
    for name, expected in (("dict.txt", True), ("train.bin", True), ("train.idx", True), ("test.bin", False),
                           ("train.importance_s1.bin", True), ("train.importance_s1.json", True),
                           ("train.importance_s2.bin", False), ("valid.pmi_units.bin", False),
                           ("train.q-a.q.bin", True)):
        assert read_by(name, ["train", "valid"], words) == expected, name


def test_the_raw_p_part_counts_each_distinct_comparison_once_below_alpha():
    """Issue 88's null control reads the family's p-values before Holm: how many of the distinct comparisons fall
    below 0.05 (by the rule's p and by the t over seeds), and how many Holm named."""
    import math

    from fairseq_maskplug.compare.report import raw_p_lines
    from fairseq_maskplug.evaluation.paired_comparison import Comparison

    def comparison(a, rule_p, p, reading="no difference shown", same_as=None):
        return Comparison(a=a, b="base", seeds=5, items=100, difference=0.0, seed_se=1.0, seed_interval=(-1, 1),
                          crossed_interval=(-1, 1), p=p, crossed_p=rule_p, rule_p=rule_p, uncapped_rule_p=rule_p,
                          excludes="", components=(0, 0, 0), discordant=(0, 0), reading=reading, same_as=same_as)

    found = [comparison("r1", 0.03, 0.01, "A better"), comparison("r2", 0.2, 0.04), comparison("r3", 0.7, 0.6),
             comparison("r4", 0.03, 0.01, same_as="r1 − base"), comparison("r5", math.nan, math.nan)]
    lines = raw_p_lines(found)
    assert "(3 distinct comparison(s))" in lines[0]
    assert lines[2].endswith("1 of 3 (33%) below 0.05; sorted: 0.030, 0.200, 0.700")
    assert lines[3].endswith("2 of 3 (67%) below 0.05; sorted: 0.010, 0.040, 0.600")
    assert lines[4] == "- named after Holm: 1"
    assert raw_p_lines([])[-1] == "- none to read yet"

"""Every comparison table on the pages is generated from a stored result (docs/results/*.json, the files
a plan's report, a speed table, or a file of the former GPU harness): each block between ``<!-- results: FILE PART ... -->`` and
``<!-- end results -->`` is what ``python benchmarks/pages.py --update`` makes of its file, so a
figure no stored file produces cannot stay, and changing one stored outcome changes the page."""

import json
import sys

import pytest

from fairseq_helpers import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import pages  # noqa: E402


def blocks():
    """``(page, file, part)`` of every generated block; a findings block's glob gives each file it matches that
    holds comparisons (at least one)."""
    found = []
    for pattern in pages.PAGES:
        for page in sorted(REPO.glob(pattern)):
            for m in pages.RESULTS_BLOCK.finditer(page.read_text()):
                if m["part"] != pages.FINDINGS:
                    found.append((page, m["file"], m["part"]))
                    continue
                read = {run.split(" (")[0] for run, _ in pages.stored_families()}  # the files holding comparisons
                matched = sorted(str(path.relative_to(REPO)) for path in REPO.glob(m["file"]))
                assert set(matched) & read, (page, m["file"])
                found += [(page, name, m["part"]) for name in matched if name in read]
    return found


def test_every_generated_block_is_what_its_stored_result_gives():
    assert blocks(), "no page cites a stored result"
    assert pages.pages_out_of_date() == [], "run: python benchmarks/pages.py --update"


def test_every_cited_file_is_stored_and_records_how_it_was_made():
    for page, results, _ in blocks():
        data = json.loads((REPO / results).read_text())
        if data["meta"].get("kind") == "policy_speed":  # benchmarks/gpu_policy_speed.py: no seeds, no outcomes
            assert {"device", "shape", "tokens", "batch_size", "commit", "date"} <= set(data["meta"]), results
            continue
        if data["meta"].get("kind") == "collator_speed":  # benchmarks/bench_collators.py: rows/s of every repeat
            assert {"device", "batch", "tokens", "repeats", "commit", "date"} <= set(data["meta"]), results
            sets = data["rows"] if "hf" not in data["rows"] else {"word": data["rows"]}  # one row set per tokenizer
            assert all(len(times) == data["meta"]["repeats"] for rows in sets.values() for times in rows.values()), \
                results
            continue
        if data["meta"].get("kind") == "general_model_diagnosis":  # issue 100's general models probed: how each was
            assert {"device", "commit", "date", "commands", "test_items", "train_items"} <= set(data["meta"]), results
            assert all({"model", "options", "peak_lr", "updates"} <= set(row) for row in data["rows"]), results
            continue
        if data["meta"].get("kind") == "mlm_scores":  # evaluate-mlm's lines: the command, what was scored, each model
            assert {"device", "commit", "date", "commands", "scored", "mask_prob", "seed"} <= set(data["meta"]), results
            assert all({"model", "checkpoint", "loss", "masked"} <= set(row) for row in data["rows"]), results
            continue
        if data["meta"].get("kind") == "comparison":  # fairseq-maskplug-compare's report: the plan is the shape
            assert {"devices", "plan", "arms", "seeds", "commit", "date", "command"} <= set(data["meta"]), results
            assert data["meta"]["devices"] and not data.get("missing"), results  # a page cites only what finished
        else:
            assert {"device", "shape", "seeds", "commit", "date"} <= set(data["meta"]), (page, results)
        assert all(len(s["correct"]) == s["n"] for s in data["scores"] if s.get("correct")), results


def test_changing_one_stored_outcome_changes_the_page(tmp_path):
    """One test sentence's outcome flipped in one seed of a stored file: the block generated from the copy
    differs from the page's (the MR comparison of its FE rows), and so does the FE curve when one loss moves."""
    source = REPO / "docs" / "results" / "science_h200_2026-11-27.json"
    data = json.loads(source.read_text())
    changed = tmp_path / "changed.json"
    for part, change in (("fe", "outcome"), ("fe-curves", "loss")):
        copy = json.loads(json.dumps(data))
        if change == "outcome":
            score = next(s for s in copy["scores"] if s["experiment"] == "fe" and s["split"] == "test")
            score["correct"] = ("0" if score["correct"][0] == "1" else "1") + score["correct"][1:]
        else:
            copy["curves"][0]["points"][-1][1] += 0.01
        changed.write_text(json.dumps(copy))
        assert pages.page_block(changed, part) != pages.page_block(source.relative_to(REPO), part), part


def test_a_stored_report_names_no_folder_of_the_machine_it_ran_on(tmp_path):
    """``benchmarks/pages.py --store``: a report's paths below the repository's root are stored relative to it, and
    a report with missing units is refused; every stored file names no absolute folder of the repository."""
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"meta": {"kind": "comparison", "plan": str(REPO / "recipes" / "x.toml"),
                                           "other": "/elsewhere/y", "commit": "abc1234",
                                           "command": f"compare {REPO}/recipes/x.toml --set out={REPO}/work/o"},
                                  "scores": [], "missing": []}))
    pages.store(report, tmp_path / "stored.json")
    meta = json.loads((tmp_path / "stored.json").read_text())["meta"]
    assert meta == {"kind": "comparison", "plan": "recipes/x.toml", "other": "/elsewhere/y", "commit": "abc1234",
                    "command": "compare recipes/x.toml --set out=work/o"}
    pages.store(report, tmp_path / "stored.json")  # the same run again: replaced as it was
    report.write_text(json.dumps({"meta": {"kind": "comparison", "commit": "abc1234"}, "scores": [], "missing": ["a:1"]}))
    with pytest.raises(SystemExit, match="units missing"):
        pages.store(report, tmp_path / "refused.json")
    # issue 104: a stored file holding another run is never replaced unasked; what is not a report is refused
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"meta": {"kind": "comparison", "plan": "recipes/y.toml", "commit": "def5678"},
                                 "scores": [], "missing": []}))
    before = (tmp_path / "stored.json").read_text()
    with pytest.raises(SystemExit, match="holds another run .*plan recipes/x.toml.*--replace"):
        pages.store(other, tmp_path / "stored.json")
    assert (tmp_path / "stored.json").read_text() == before
    pages.store(other, tmp_path / "stored.json", replace=True)
    assert json.loads((tmp_path / "stored.json").read_text())["meta"]["plan"] == "recipes/y.toml"
    other.write_text(json.dumps({"meta": {"kind": "mlm_scores"}, "rows": []}))
    with pytest.raises(SystemExit, match="not a fairseq-maskplug-compare report"):
        pages.store(other, tmp_path / "refused.json")
    assert not (tmp_path / "refused.json").exists()
    for path in (REPO / "docs" / "results").glob("*.json"):
        assert str(REPO.resolve()) not in path.read_text(encoding="utf-8"), path

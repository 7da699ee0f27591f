"""The lent GPU machine's commands of issue 72, run here first: ``recipes/gpu_speed.sh`` (every policy's training
speed beside random, ``benchmarks/gpu_policy_speed.py``) at tiny size on CPU, the tables a stored speed result
gives the pages, and ``recipes/gpu_detach.sh`` (work that outlasts one device command)."""

import json
import os
import subprocess
import sys

import pytest

from fairseq_helpers import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import gpu_policy_speed  # noqa: E402
import pages  # noqa: E402

from fairseq_maskplug.masking import MASK_POLICY_REGISTRY  # noqa: E402


def test_every_registered_policy_has_a_row_in_each_task_that_takes_it():
    mlm = {args[args.index("--mask-policy") + 1] for model, args, _ in gpu_policy_speed.ROWS.values()
           if model == "roberta" and "--mask-policy" in args}
    built_in = {name for name, cls in MASK_POLICY_REGISTRY.items() if cls.__module__.startswith("fairseq_maskplug.")}
    assert mlm == built_in  # (other tests register policies of their own in the same process)
    for name, (_, args, reference) in gpu_policy_speed.ROWS.items():
        assert reference is None or reference in gpu_policy_speed.REFERENCES, name


def row(name, words, share=None):
    share = share or {"wait": 0.0, "prepare": 0.0, "forward": 0.4, "backward": 0.5, "other": 0.1}
    return {"row": name, "words_per_s": words, "peak_mib": 1000.0, "share": share,
            "outside_forward_backward": 1 - share["forward"] - share["backward"]}


def test_ratios_are_against_the_mean_of_the_references_first_and_last_runs_and_slow_rows_are_named():
    slow_share = {"wait": 0.5, "prepare": 0.1, "forward": 0.15, "backward": 0.2, "other": 0.05}
    data = {"meta": {"kind": "policy_speed", "shape": "base", "tokens": 512, "batch_size": 16, "updates": 30},
            "rows": [row("random", 1000.0), row("ptw", 700.0, slow_share), row("l3", 990.0),
                     row("guided_denoising random", 500.0), row("guided_denoising span", 450.0),
                     row("random", 1100.0), row("guided_denoising random", 500.0)]}
    ratios = gpu_policy_speed.ratios(data["rows"])
    assert ratios == pytest.approx({"ptw": 700 / 1050, "l3": 990 / 1050, "guided_denoising span": 0.9})
    parts = gpu_policy_speed.summary_parts(data)
    table = "\n".join(parts["speed"])
    assert "| random | 1,000 / 1,100 | reference (first / last) |" in table
    assert "Below 0.8x: ptw (0.67x: waiting for the loader 50%, prepare_batch on the host 10%" in table
    assert set(parts) == {"speed", "speed-ptw", "speed-l3", "speed-span"}
    assert parts["speed-span"][-3].startswith("- guided_denoising (bart_base): 0.90x random's words/s (450)")
    assert parts["speed-span"][-1] in parts["speed"]
    assert parts["speed-span"][-1].startswith("The references, timed first and again last: random 1,000 then 1,100 "
                                             "words/s (10% of their mean); guided_denoising random 500 then 500")
    assert "where its time goes: waiting for the loader 50%" in parts["speed-ptw"][2]
    assert gpu_policy_speed.ratio_line(data).startswith("ratio_min=0.667 ratio_ptw=0.667 ratio_l3=0.943")


@pytest.mark.e2e
@pytest.mark.full
def test_the_speed_command_times_every_row_at_toy_size_and_its_file_makes_the_pages_tables(tmp_path):
    """recipes/gpu_speed.sh as the device runs it, with the plugin installed already ("-") and the CPU's tiny shapes
    (about 40 s on 2 cores): every row trained and timed, its phases adding up, the file a page can cite."""
    env = dict(os.environ, PATH=f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}", MASKPLUG_COMMIT="abc1234")
    result = subprocess.run(["bash", "recipes/gpu_speed.sh", "-", tmp_path / "out", "600", "--", "--cpu", "--smoke"],
                            cwd=REPO, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    data = json.loads((tmp_path / "out" / "speed.json").read_text())
    assert [r["row"] for r in data["rows"]] == [*gpu_policy_speed.ROWS, *gpu_policy_speed.REFERENCES]
    assert data["meta"]["commit"] == "abc1234" and data["left_out"] == data["failed"] == []
    for measured in data["rows"]:
        assert measured["words_per_s"] > 0 and sum(measured["share"].values()) == pytest.approx(1.0, abs=1e-6)
    assert (tmp_path / "out" / "speed.log").read_text().strip().splitlines()[-1].startswith("ratio_min=")
    stored = tmp_path / "speed.json"
    stored.write_text(json.dumps(data))
    block = pages.page_block(stored, "speed")
    assert block.startswith(f"From `{stored}` (CPU, commit abc1234, ") and "| pmi |" in block
    assert "ptw's training speed on a GPU" in pages.page_block(stored, "speed-ptw")


def test_an_unknown_row_is_refused_in_one_line():
    result = subprocess.run([sys.executable, "benchmarks/gpu_policy_speed.py", "--cpu", "--smoke", "--only", "nope"],
                            cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 2 and "--only: unknown rows nope" in result.stderr


@pytest.mark.e2e  # a recipe script (it trains nothing here)
def test_detached_work_is_collected_with_its_status_and_files(tmp_path):
    job = tmp_path / "job"
    start = ["bash", "recipes/gpu_detach.sh", "start", job, "--", "bash", "-c", f"echo made > {job}/made.txt; exit 3"]
    assert "started in" in subprocess.run(start, cwd=REPO, capture_output=True, text=True, check=True).stdout
    collected = subprocess.run(["bash", "recipes/gpu_detach.sh", "collect", job, tmp_path / "out", "60"], cwd=REPO,
                               capture_output=True, text=True)
    assert collected.returncode == 3 and "finished (exit 3)" in collected.stdout
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["log", "made.txt", "status"]
    again = subprocess.run(start, cwd=REPO, capture_output=True, text=True)
    assert again.returncode == 2 and "exists: give a new folder" in again.stderr


@pytest.mark.e2e  # a recipe script (it trains nothing here)
def test_collecting_unfinished_work_returns_124_with_the_log_so_far(tmp_path):
    job = tmp_path / "job"
    subprocess.run(["bash", "recipes/gpu_detach.sh", "start", job, "--", "bash", "-c", "echo begun; sleep 10"],
                   cwd=REPO, check=True, capture_output=True)
    collected = subprocess.run(["bash", "recipes/gpu_detach.sh", "collect", job, tmp_path / "out", "2"], cwd=REPO,
                               capture_output=True, text=True)
    assert collected.returncode == 124 and "still running after 2 s" in collected.stderr
    assert (tmp_path / "out" / "log").read_text() == "begun\n"

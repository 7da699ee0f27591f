"""A resume under other task options than the checkpoint's says so, one line per option, keeps the history of
settings in the checkpoints it saves, and refuses a checkpoint whose recorded policy this version does not know
(issue 76: a run resumed with another --mask-policy went on under it without a word)."""

import pytest
import torch

from fairseq_helpers import CPU_RUN, TINY_ROBERTA, BIN, REPO, check, run, train

pytestmark = pytest.mark.e2e


def resume(data, save_dir, *options):
    return run([BIN / "fairseq-maskplug-train", data, "--task", "guided_mlm", "--tokens-per-sample", "32",
                "--save-dir", save_dir, *TINY_ROBERTA, *CPU_RUN, *options])


def test_a_resume_names_each_changed_option_and_keeps_the_history(tiny_data, tmp_path):
    data = tiny_data / "bin"
    check(train(data, tmp_path / "ck", "--mask-policy", "random", "--max-update", "2"))
    result = check(resume(data, tmp_path / "ck", "--mask-policy", "span", "--max-update", "4"))
    said = [line for line in (result.stdout + result.stderr).splitlines() if "resuming " in line and " was " in line]
    assert any("--mask-policy was 'random' in the checkpoint, 'span' now" in line for line in said), said
    state = torch.load(tmp_path / "ck" / "checkpoint_last.pt", weights_only=False)
    history = state["task_state"]["option_history"]
    assert [(h["from_update"], h["options"]["mask_policy"]) for h in history] == [(0, "random"), (2, "span")]
    assert state["cfg"]["task"]["mask_policy"] == "span"
    # the same options again: nothing said, nothing added
    again = check(resume(data, tmp_path / "ck", "--mask-policy", "span", "--max-update", "6"))
    assert " was " not in "".join(l for l in (again.stdout + again.stderr).splitlines() if "resuming " in l)
    assert len(torch.load(tmp_path / "ck" / "checkpoint_last.pt", weights_only=False)["task_state"][
        "option_history"]) == 2


def test_a_checkpoint_of_an_unknown_policy_is_refused_naming_it(tiny_data, tmp_path):
    data = tiny_data / "bin"
    check(train(data, tmp_path / "ck", "--mask-policy", "random", "--max-update", "2"))
    path = tmp_path / "ck" / "checkpoint_last.pt"
    state = torch.load(path, weights_only=False)
    state["cfg"]["task"]["mask_policy"] = "retired_policy"
    torch.save(state, path)
    result = resume(data, tmp_path / "ck", "--mask-policy", "random", "--max-update", "4")
    assert result.returncode == 2
    assert "--mask-policy 'retired_policy', which this version does not register (registered: " in result.stderr
    assert "Traceback" not in result.stderr

"""docs/reference.md is rendered from the registered dataclasses and kept current."""

from fairseq_helpers import BIN, REPO, run

from fairseq_maskplug.commands.options_reference import main, render


def test_the_committed_reference_is_current(tmp_path):
    """Rendered in a process of its own: this one holds the policies and tasks other tests register."""
    fresh = tmp_path / "reference.md"
    result = run([BIN / "python", "-m", "fairseq_maskplug.commands.options_reference", "--output", fresh],
                 new_process=True)
    assert result.returncode == 0, result.stderr
    assert (REPO / "docs" / "reference.md").read_text(encoding="utf-8") == fresh.read_text(encoding="utf-8"), \
        "run: python -m fairseq_maskplug.commands.options_reference"


def test_the_reference_names_every_registration_and_option_once():
    import dataclasses

    from fairseq.tasks import TASK_REGISTRY
    from fairseq_maskplug.masking import MASK_POLICY_DATACLASS_REGISTRY, MASK_POLICY_REGISTRY

    page = render()
    for name, cls in TASK_REGISTRY.items():
        if cls.__module__.startswith("fairseq_maskplug."):
            assert page.count(f"### `--task {name}`\n") == 1
    for name in MASK_POLICY_REGISTRY:
        assert page.count(f"### `--mask-policy {name}`\n") == 1
        options = MASK_POLICY_DATACLASS_REGISTRY[name]
        for field in dataclasses.fields(options) if options is not None else ():
            assert page.count(f"| `--{field.name.replace('_', '-')}` |") == 1  # under its policy, not per task
    assert "| `--answer-max-length` (also `--span-max-length`) | int | `10` | [1, inf) |" in page
    assert "&lt;s>" in page and "${" not in page


def test_check_refuses_a_stale_page_and_writes_nothing(tmp_path):
    stale = tmp_path / "reference.md"
    stale.write_text("old\n")
    assert main(["--check", "--output", str(stale)]) == 1 and stale.read_text() == "old\n"
    assert main(["--output", str(stale)]) == 0 and main(["--check", "--output", str(stale)]) == 0
    assert [p.name for p in tmp_path.iterdir()] == ["reference.md"]  # no temporary left behind


def test_check_passes_on_the_committed_page_as_documented():
    result = run([BIN / "python", "-m", "fairseq_maskplug.commands.options_reference", "--check"], new_process=True)
    assert result.returncode == 0, result.stderr

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
    assert "| `--answer-max-length` | int | `10` | [1, inf) |" in page and "(also `--" not in page
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


def _registered_options():
    """``(section, dataclass, fields left out)`` of every task, criterion and policy of the package."""
    import fairseq_maskplug.plugin  # noqa: F401  (the registrations, whatever ran before)
    from fairseq.criterions import CRITERION_DATACLASS_REGISTRY, CRITERION_REGISTRY
    from fairseq.tasks import TASK_REGISTRY
    from fairseq_maskplug.commands.options_reference import _task_options
    from fairseq_maskplug.masking import MASK_POLICY_DATACLASS_REGISTRY

    for name, cls in TASK_REGISTRY.items():
        if cls.__module__.startswith("fairseq_maskplug."):
            yield (f"task {name}",) + _task_options(name)[1:]
    for name, cls in CRITERION_REGISTRY.items():
        if cls.__module__.startswith("fairseq_maskplug.") and CRITERION_DATACLASS_REGISTRY.get(name) is not None:
            yield f"criterion {name}", CRITERION_DATACLASS_REGISTRY[name], frozenset()
    for name, options in MASK_POLICY_DATACLASS_REGISTRY.items():
        if options is not None and options.__module__.startswith("fairseq_maskplug."):
            yield f"policy {name}", options, frozenset()


def test_every_numeric_or_choice_option_says_where_its_default_comes_from():
    """The knobs of a method (a range or a set of choices) each declare the source of their default."""
    import enum

    from fairseq_maskplug.commands.options_reference import _fields
    from fairseq_maskplug.common.option_ranges import SOURCES

    missing, checked = [], 0
    for section, options, exclude in _registered_options():
        for field in _fields(options, exclude):
            if "range" in field.metadata or (isinstance(field.type, type) and issubclass(field.type, enum.Enum)):
                checked += 1
                source = field.metadata.get("source")
                if source is None:
                    missing.append(f"{section}: --{field.name.replace('_', '-')}")
                else:
                    assert any(source == s or source.startswith(s + " ") for s in SOURCES), source
    assert checked >= 60 and not missing, missing  # 68 (section, option) pairs on 2026-11-24


def test_option_refuses_a_source_it_does_not_know():
    import pytest

    from fairseq_maskplug.common.option_ranges import option

    assert option(1, "x", source="authors' code (stage 1)").metadata["source"] == "authors' code (stage 1)"
    with pytest.raises(ValueError, match="must start with one of paper, authors' code, ours"):
        option(1, "x", source="folklore")


def test_method_page_tables_are_generated_and_checked(tmp_path):
    page = tmp_path / "l3.md"
    page.write_text("# L3\n\n<!-- options of policy l3, task joint_mlm_classification (generated; do not edit) -->\n"
                    "stale\n<!-- end of the generated options -->\n\nafter\n")
    untouched = tmp_path / "notes.md"
    untouched.write_text("no table here\n")
    reference = tmp_path / "reference.md"
    assert main(["--output", str(reference)]) == 0
    text = page.read_text()
    assert "stale" not in text and text.endswith("<!-- end of the generated options -->\n\nafter\n")
    rows = [line for line in text.splitlines() if line.startswith("| `--")]
    assert rows[0].startswith("| `--l3-mean` | `0.15` | paper |")
    assert any(r.startswith("| `--tartan-meta-lr` | `0.01` | authors' code |") for r in rows)
    assert len({r.split(" |")[0] for r in rows}) == len(rows)  # each option once
    assert untouched.read_text() == "no table here\n"
    assert main(["--check", "--output", str(reference)]) == 0
    page.write_text(text.replace("| paper |", "| ours |", 1))
    assert main(["--check", "--output", str(reference)]) == 1

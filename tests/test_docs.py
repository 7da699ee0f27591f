"""The documentation site (``mkdocs.yml`` over ``docs/``) builds in strict mode: a broken link, a
missing image or a page left out of the nav fails the build, and so this test."""

import shutil

from fairseq_helpers import BIN, REPO, run


def build(config, site):
    return run([BIN / "mkdocs", "build", "--strict", "--config-file", config, "--site-dir", site])


def test_the_site_builds_strictly(tmp_path):
    result = build(REPO / "mkdocs.yml", tmp_path / "site")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert (tmp_path / "site" / "tlm" / "index.html").is_file()
    assert (tmp_path / "site" / "reference" / "index.html").is_file()


def test_a_broken_link_fails_the_build(tmp_path):
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    page = tmp_path / "docs" / "tlm.md"
    page.write_text(page.read_text(encoding="utf-8") + "\nSee [the results](no-such-page.md).\n", encoding="utf-8")
    result = build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert result.returncode != 0 and "no-such-page.md" in result.stderr

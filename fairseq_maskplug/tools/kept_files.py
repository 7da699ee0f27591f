"""What a rerun of a command keeps of its earlier output directory: every file it did not write.

``prepare-text`` and ``retrieve`` write directories that users and producers add to: the producers' tracks beside
the binarized splits (the documented layout), the BPE-encoded text the TLM page has the user write into
``retrieve --out``. A rerun builds the new output under a temporary name and swaps it in
(:func:`..tools.binarize.atomic_directory`); before the swap, :func:`carry_over` links into the new output every file
of the old one that the command did not write (the owner file records what it wrote; an output from before that
record: every file the new run does not write again). A kept track whose split's tokens changed would go stale:
the rerun is refused, naming it, and the old output stays as it was.
"""

import json
import os
from pathlib import Path
from typing import List

from ..common.atomic import OWNER_FILE


def written_by_command(directory: Path) -> set:
    """The files (relative paths) the owner file of ``directory`` says its command wrote; empty where it records
    none (outputs written before the record)."""
    try:
        return set(json.loads((Path(directory) / OWNER_FILE).read_text(encoding="utf-8")).get("written", []))
    except (OSError, ValueError, AttributeError):
        return set()


def files_under(directory: Path) -> List[str]:
    """Every regular file under ``directory``, as a relative path, in sorted order."""
    directory = Path(directory)
    return sorted(str(path.relative_to(directory)) for path in directory.rglob("*")
                  if path.is_file() and not path.is_symlink())


def stale_tracks(old: Path, new: Path, kept: List[str]) -> List[str]:
    """The kept tracks (their ``.json`` record names the split and its token fingerprint) whose split exists in
    ``new`` with other tokens than they were computed for."""
    from ..data.side_info import token_fingerprint

    stale = []
    for name in kept:
        if not name.endswith(".json"):
            continue
        try:
            record = json.loads((old / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(record, dict) or "token_fingerprint" not in record or "tokens" not in record:
            continue
        split = new / Path(name).parent / record["tokens"]
        if Path(f"{split}.bin").is_file() and Path(f"{split}.idx").is_file() and \
                token_fingerprint(str(split)) != record["token_fingerprint"]:
            stale.append(name[:-len(".json")])
    return stale


def carry_over(old: Path, new: Path, command: str) -> List[str]:
    """Link into ``new`` every file of ``old`` that ``command`` did not write (module docstring); returns them.
    Raises ValueError, naming them, where a kept track would no longer match its split's tokens."""
    old, new = Path(old), Path(new)
    if not old.is_dir():
        return []
    ours = written_by_command(old) | {OWNER_FILE}
    written_now = set(files_under(new))
    kept = [name for name in files_under(old) if name not in ours and name not in written_now]
    stale = stale_tracks(old, new, kept)
    if stale:
        raise ValueError(f"{old}: rerunning {command} changes the tokens that {len(stale)} track(s) of others were "
                         f"computed for ({', '.join(stale[:3])}{', ...' if len(stale) > 3 else ''}): they would go "
                         "stale; move or delete them, then rerun (nothing was replaced)")
    for name in kept:
        target = new / name
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(old / name, target)  # no copy; the old directory is removed only after the swap
        except OSError:
            import shutil
            shutil.copy2(old / name, target)
    return kept

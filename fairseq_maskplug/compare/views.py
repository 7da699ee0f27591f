"""The plan's own views of its data folders (issue 89): ``OUT/views/corpus`` and ``OUT/views/task`` mirror the corpus
and the labelled task file by file with symbolic links, and every produce command, check, unit and report of the
plan reads the views. A producer writes its tracks atomically (a new file renamed over the name: the link is
replaced, never the file it names), so what a plan's run writes lands under its output folder and the user's folders
are never written. The views are refreshed at every run: a file added to a user's folder is linked, a link whose
file is gone is removed, a file a producer wrote is kept."""

import dataclasses
import json
import os
from pathlib import Path
from typing import Optional

from .plan import Plan

#: the view of each data folder of a plan, under ``OUT/views/`` (a plan's own commands may write ``OUT/data/``); the
#: task first: where both folders have one parent, a path there is written back as ``{task}/..``
VIEWS = {"labelled": "task", "corpus": "corpus"}
#: what the views mirror, written when they are made (``{"corpus": PATH or null, "task": PATH}``)
SOURCES = "sources.json"


def views_dir(plan: Plan) -> Path:
    return plan.out / "views"


def mirror(source: Path, view: Path) -> None:
    """Link every file below ``source`` from the same place below ``view`` (folders made as folders), where
    ``view`` holds nothing of that name; remove the links below ``view`` whose file is gone."""
    for folder, _, names in os.walk(source):
        here = view / Path(folder).relative_to(source)
        here.mkdir(parents=True, exist_ok=True)
        for name in names:
            link = here / name
            if not link.exists() and not link.is_symlink():
                try:
                    link.symlink_to(Path(folder).resolve() / name)
                except FileExistsError:
                    pass  # a unit started beside this one linked it first
    for folder, _, names in os.walk(view):
        for name in names:
            path = Path(folder) / name
            if path.is_symlink() and not path.exists():
                path.unlink(missing_ok=True)


def unlink_split_links(folder: Path, splits) -> None:
    """Remove every link below ``folder`` (a :func:`mirror`) to a file of one of ``splits`` (``SPLIT.bin``, a
    producer's ``SPLIT.NAME.bin``, ...): a copy that replaces those splits' lines must not keep tracks that no longer
    align with them."""
    for link in folder.rglob("*"):
        if link.is_symlink() and link.name.split(".", 1)[0] in splits:
            link.unlink()


def sources(plan: Plan) -> dict:
    """``{"corpus": PATH or None, "task": PATH}``: the folders the views of ``plan`` (as read) mirror."""
    return {name: str(getattr(plan, key)) if getattr(plan, key) else None for key, name in VIEWS.items()}


def recorded_sources(plan: Plan) -> Optional[dict]:
    """What an earlier run's views mirror (:data:`SOURCES`), or None where none was made."""
    path = views_dir(plan) / SOURCES
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def build_views(plan: Plan) -> None:
    """Make or refresh the views of the plan's folders (``plan``: as read, on the user's folders)."""
    from ..common.atomic import write_text

    for key, name in VIEWS.items():
        if getattr(plan, key) is not None:
            mirror(getattr(plan, key), views_dir(plan) / name)
    write_text(str(views_dir(plan) / SOURCES), json.dumps(sources(plan)) + "\n")


def views_built(plan: Plan) -> bool:
    """Whether an earlier run made the views of these very folders (:func:`check_views` refuses others')."""
    return recorded_sources(plan) == sources(plan)


def check_views(plan: Plan) -> None:
    """Refuse, before any work, an output folder whose views mirror other folders than the plan's (its data
    changed since it ran): their links and tracks are another folder's, and a unit would read them."""
    from .plan import PlanError

    recorded, given = recorded_sources(plan) or {}, sources(plan)
    for name in VIEWS.values():
        if recorded.get(name) and given[name] and recorded[name] != given[name]:
            raise PlanError(f"{plan.path}: out {plan.out} was run on another {name}, {recorded[name]} (its views, "
                            f"{views_dir(plan) / name}, hold that folder's files and tracks), not {given[name]}: "
                            "give another out")


def given_parents(plan: Plan) -> dict:
    """``{"{corpus}/..": PATH, "{task}/..": PATH}``: the user's folders' parents, which a view's ``..`` stands for
    (the placeholders :func:`.commands.filled` fills and :func:`.records.placeholders` writes back)."""
    return {f"{{{name}}}/..": given_folder(plan, key).parent for key, name in VIEWS.items()
            if given_folder(plan, key) is not None}


def on_views(plan: Plan) -> Plan:
    """The plan reading its views: its corpus, task and every arm's data that is one of them."""
    moved = {getattr(plan, key): views_dir(plan) / name for key, name in VIEWS.items() if getattr(plan, key)}
    arms = tuple(dataclasses.replace(arm, data=moved.get(arm.data, arm.data)) for arm in plan.arms)
    return dataclasses.replace(plan, corpus=moved.get(plan.corpus), labelled=moved[plan.labelled], arms=arms,
                               given=(plan.corpus, plan.labelled))


def given_folder(plan: Plan, key: str) -> Optional[Path]:
    """The user's folder of ``corpus`` or ``labelled``, whether or not ``plan`` reads its view."""
    if plan.given is None:
        return getattr(plan, key)
    return dict(zip(("corpus", "labelled"), plan.given))[key]

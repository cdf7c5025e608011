"""Build a small synthetic AppWorld task set on disk, for offline use and tests.

Runs with AppWorld's own interpreter. The real task data (``appworld download data``) needs
the network; this script writes the same on-disk layout from the package's own code:

* ``data/api_docs/standard/<app>.json``: generated from the apps' source;
* ``data/base_dbs/<app>.db``: empty tables for every app (the api_docs app serves its docs);
* ``data/tasks/<task_id>/``: ``specs.json``, the task's world as changes on the base DBs,
  and ``ground_truth/`` (an ``evaluation.py`` that compares the start and end databases, the
  expected answer, and ``coevolve_reference.py``: a known-good solution);
* ``data/datasets/<split>.txt``: the task ids of each split.

Nothing here is copied from AppWorld's data; the people, accounts and tasks are invented.
Usage: ``python build_synthetic.py --root ROOT`` (writes ROOT/data; refuses to overwrite).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
import time

SUPERVISOR = {"first_name": "Noor", "last_name": "Haddad", "email": "noor.haddad@example.org", "phone_number": "4155550123"}
PASSWORDS = {"spotify": "tune-Kq81x", "simple_note": "memo-Zr42p", "todoist": "todo-Wm93c"}
WORLD_DATETIME = "2023-06-12T09:30:00"

# Shared reference-code fragments: the supervisor's passwords, then a login per app.
LOGIN = textwrap.dedent(
    """\
    secrets = {row["account_name"]: row["password"] for row in apis.supervisor.show_account_passwords()}
    me = apis.supervisor.show_profile()
    """
)


def login_line(app: str) -> str:
    return f'{app}_token = apis.{app}.login(username=me["email"], password=secrets["{app}"])["access_token"]\n'


# Each task: instruction, expected answer (None: no answer), reference code and the body of
# evaluate() (the checks run against models.start / models.end).
TASKS = {
    "c0e0a01_1": dict(
        split="train",
        instruction="Make a new private Spotify playlist named 'Evening Walk', then tell me how many playlists I have in total.",
        answer=2,
        code=LOGIN
        + login_line("spotify")
        + textwrap.dedent(
            """\
            apis.spotify.create_playlist(title="Evening Walk", is_public=False, access_token=spotify_token)
            total = len(apis.spotify.show_playlist_library(access_token=spotify_token))
            apis.supervisor.complete_task(answer=total)
            """
        ),
        checks=textwrap.dedent(
            """\
            with test("exactly one playlist named 'Evening Walk' was added"):
                before = [p for p in models.start.spotify.Playlist.all() if p.title == "Evening Walk"]
                after = [p for p in models.end.spotify.Playlist.all() if p.title == "Evening Walk"]
                test.case(len(after) - len(before), "==", 1)
            with test("the new playlist is private"):
                after = [p for p in models.end.spotify.Playlist.all() if p.title == "Evening Walk"]
                test.case(all(not p.is_public for p in after), "==", True)
            with test("the answer is the number of playlists"):
                test.answer(answer_of(models), ground_truth_answer)
            """
        ),
    ),
    "c0e0a01_2": dict(
        split="train",
        instruction="Add a note called 'Packing list' to Simple Note that says 'passport, charger, sunscreen'.",
        answer=None,
        code=LOGIN
        + login_line("simple_note")
        + textwrap.dedent(
            """\
            apis.simple_note.create_note(title="Packing list", content="passport, charger, sunscreen", access_token=simple_note_token)
            apis.supervisor.complete_task()
            """
        ),
        checks=textwrap.dedent(
            """\
            with test("one note titled 'Packing list' was added with the requested text"):
                before = {n.id for n in models.start.simple_note.Note.all()}
                new = [n for n in models.end.simple_note.Note.all() if n.id not in before]
                test.case(len(new), "==", 1)
                test.case(new[0].title, "==", "Packing list")
                test.case("passport" in new[0].content and "sunscreen" in new[0].content, "==", True)
            """
        ),
    ),
    "c0e0a01_3": dict(
        split="train",
        instruction="How many notes do I currently have in Simple Note?",
        answer=2,
        code=LOGIN
        + login_line("simple_note")
        + textwrap.dedent(
            """\
            notes = apis.simple_note.search_notes(access_token=simple_note_token)
            apis.supervisor.complete_task(answer=len(notes))
            """
        ),
        checks=textwrap.dedent(
            """\
            with test("no note was added or removed"):
                test.case(len(models.end.simple_note.Note.all()), "==", len(models.start.simple_note.Note.all()))
            with test("the answer is the number of notes"):
                test.answer(answer_of(models), ground_truth_answer)
            """
        ),
    ),
    "c0e0b02_1": dict(
        split="dev",
        instruction="Create a Todoist project called 'Garden' for me.",
        answer=None,
        code=LOGIN
        + login_line("todoist")
        + textwrap.dedent(
            """\
            apis.todoist.create_project(name="Garden", access_token=todoist_token)
            apis.supervisor.complete_task()
            """
        ),
        checks=textwrap.dedent(
            """\
            with test("a project named 'Garden' was added"):
                before = [p for p in models.start.todoist.Project.all() if p.name == "Garden"]
                after = [p for p in models.end.todoist.Project.all() if p.name == "Garden"]
                test.case(len(after) - len(before), "==", 1)
            """
        ),
    ),
}

EVALUATION_HEADER = textwrap.dedent(
    """\
    import json


    def answer_of(models):
        raw = models.end.supervisor.Task.all()[0].answer
        try:
            return json.loads(raw)
        except (TypeError, ValueError):
            return raw


    def evaluate(test, public_data, private_data, main_user, models, ground_truth_answer):
    """
)


def seed_world(mc, instruction: str) -> None:
    """The invented world every task starts from: one person with three app accounts."""
    person = dict(SUPERVISOR, birthday="1991-04-02")
    mc.admin.MainUser.create(**person).save()
    sup = mc.supervisor.Supervisor.create(**person)
    sup.save()
    for app, pw in PASSWORDS.items():
        mc.supervisor.AccountPassword.create(supervisor_id=sup.id, account_name=app, password=pw).save()
    mc.supervisor.Task.create(supervisor_id=sup.id, instruction=instruction).save()
    name = dict(first_name=SUPERVISOR["first_name"], last_name=SUPERVISOR["last_name"], email=SUPERVISOR["email"])
    sp_user = mc.spotify.User.create(**name, password=PASSWORDS["spotify"], verified=True)
    sp_user.save()
    mc.spotify.Playlist.create(user_id=sp_user.id, title="Road Trip", is_public=True).save()
    note_user = mc.simple_note.User.create(**name, password=PASSWORDS["simple_note"], verified=True)
    note_user.save()
    mc.simple_note.Note.create(user_id=note_user.id, title="Books to read", content="Dune; Piranesi").save()
    mc.simple_note.Note.create(user_id=note_user.id, title="Wifi", content="ask the front desk").save()
    mc.todoist.User.create(**name, password=PASSWORDS["todoist"], verified=True).save()


def write_json(obj, path: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(obj, f, indent=1, default=str)


def build(root: str) -> dict:
    os.environ["APPWORLD_ROOT"] = root
    from appworld.api_docs import prepare_api_docs
    from appworld.apps import get_all_apps
    from appworld.collections.models import ModelCollection
    from appworld.common.constants import CANARY_STRING, DB_VERSION

    data = os.path.join(root, "data")
    if os.path.exists(os.path.join(data, "tasks")):
        raise SystemExit(f"{data} already holds tasks; refusing to overwrite")
    started = time.perf_counter()
    apps = list(get_all_apps())
    docs = {a: prepare_api_docs(a) for a in apps if a != "admin"}
    for app, entries in docs.items():
        write_json({d["api_name"]: {**d, "canary_string": CANARY_STRING} for d in entries},
                   os.path.join(data, "api_docs", "standard", f"{app}.json"))

    base = ModelCollection.load(to_db_home_path=":memory:coevolve_base", load_apps=apps, create_db=True)
    for app, entries in docs.items():
        for d in entries:
            base.api_docs.ApiDoc.create(app_name_=app, **{k: v for k, v in d.items() if k != "app_name"}).save()
    base.save(db_home_path=os.path.join(data, "base_dbs"), format="full", app_names=apps)
    base.close()

    splits: dict[str, list[str]] = {}
    for task_id, spec in TASKS.items():
        tdir = os.path.join(data, "tasks", task_id)
        mc = ModelCollection.load(to_db_home_path=f":memory:coevolve_{task_id}",
                                  from_db_home_path=os.path.join(data, "base_dbs"), load_apps=apps)
        seed_world(mc, spec["instruction"])
        mc.save(db_home_path=os.path.join(tdir, "dbs"), format="changes", app_names=apps)
        mc.close()
        write_json({"instruction": spec["instruction"], "supervisor": SUPERVISOR, "datetime": WORLD_DATETIME,
                    "db_version": DB_VERSION}, os.path.join(tdir, "specs.json"))
        gt = os.path.join(tdir, "ground_truth")
        write_json({"difficulty": 1, "mode": "minimal", "num_apps": 1, "num_apis": spec["code"].count("apis."),
                    "num_api_calls": spec["code"].count("apis."), "num_solution_code_lines": spec["code"].count("\n")},
                   os.path.join(gt, "metadata.json"))
        write_json({}, os.path.join(gt, "public_data.json"))
        write_json({}, os.path.join(gt, "private_data.json"))
        write_json(spec["answer"], os.path.join(gt, "answer.json"))
        requirements = [line.split('"')[1] for line in spec["checks"].splitlines() if line.startswith("with test(")]
        write_json([{"requirement": r, "label": "no_op_fail"} for r in requirements], os.path.join(gt, "test_data.json"))
        with open(os.path.join(gt, "evaluation.py"), "w") as f:
            f.write(EVALUATION_HEADER + textwrap.indent(spec["checks"], "    "))
        with open(os.path.join(gt, "coevolve_reference.py"), "w") as f:
            f.write(spec["code"])
        splits.setdefault(spec["split"], []).append(task_id)
    for split, ids in splits.items():
        os.makedirs(os.path.join(data, "datasets"), exist_ok=True)
        with open(os.path.join(data, "datasets", f"{split}.txt"), "w") as f:
            f.write("\n".join(ids) + "\n")
    info = {"synthetic": True, "tasks": sorted(TASKS), "splits": splits, "seconds": round(time.perf_counter() - started, 2)}
    write_json(info, os.path.join(data, "coevolve_synthetic.json"))
    return info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="AppWorld root; the task set is written to ROOT/data")
    args = parser.parse_args(argv)
    info = build(os.path.abspath(args.root))
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())

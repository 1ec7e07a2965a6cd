"""Typed tasks from blocking code, the way a Django (or Flask) view calls them.

Nothing here is async: ``admit_sync`` admits with the same checks as ``admit`` and returns
a handle whose ``result()`` blocks; ``admit_many_sync`` rides the batch path. The worker
is the same ``echomq worker django_style:app``; a plain ``def`` task runs in the worker's
threads. Tested by tests/echomq/tasks/test_examples.py.
"""

from __future__ import annotations

import os
from typing import TypedDict

import echomq

app = echomq.App(url=os.environ.get("ECHOMQ_URL", "redis://127.0.0.1:6379"), queue="mail")


class Welcome(TypedDict):
    to: str
    subject: str


@app.task(key="user_id", give_up_on=(ValueError,), max_attempts=5)
def send_welcome(user_id: int, email: str) -> Welcome:
    if "@" not in email:
        raise ValueError(f"not an address: {email!r}")  # no retry can fix it: dead at once
    return Welcome(to=email, subject=f"welcome, user {user_id}")


# --- views.py ---------------------------------------------------------------------------
def signup_view(form: dict[str, str]) -> tuple[int, dict[str, object]]:
    """POST /signup: admit the welcome mail (once per user, however often the form posts)."""
    try:
        handle = send_welcome.admit_sync(int(form["user_id"]), form["email"])
    except (KeyError, ValueError, echomq.InvalidArgument) as exc:
        return 400, {"error": str(exc)}
    return 202, {"job": handle.id, "duplicate": handle.verdict is echomq.Verdict.DUPLICATE}


def import_view(rows: list[tuple[int, str]]) -> tuple[int, dict[str, object]]:
    """POST /import: a whole list at once, one verdict per row in input order."""
    handles = send_welcome.admit_many_sync(rows)
    return 202, {"jobs": [getattr(h, "id", str(h)) for h in handles]}


def status_view(job_id: str) -> tuple[int, dict[str, object]]:
    """GET /mail/<id>: the result, waiting a little."""
    try:
        welcome = send_welcome.handle_sync(job_id).result(timeout=5)
    except echomq.JobFailed as exc:
        return 200, {"state": "failed", "error": exc.remote_message}
    except echomq.ResultTimeout:
        return 200, {"state": "waiting"}
    return 200, {"state": "sent", "welcome": dict(welcome)}

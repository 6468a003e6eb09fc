"""Temporarily change the Celery app's configuration and put back exactly what was there.

Assigning the old value back would pin it in the app's change layer, hiding the Django setting the
app reads through for the rest of the session; this removes the key instead when it was not set."""

from __future__ import annotations

from contextlib import contextmanager


@contextmanager
def celery_conf(**values):
    from config.celery import app

    changes = app.conf.changes
    had = {key: changes[key] for key in values if key in changes}
    app.conf.update(values)
    try:
        yield app
    finally:
        for key in values:
            if key in had:
                changes[key] = had[key]
            else:
                changes.pop(key, None)

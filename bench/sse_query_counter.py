"""Bench-only settings for `sse_streams.py`: the service's settings plus a count of every SQL
statement the web process sends, readable at GET /bench/queries. Not used by the service."""

import itertools

from django.db.backends.signals import connection_created

from config.settings import *  # noqa: F401,F403

ROOT_URLCONF = "sse_query_counter_urls"
_counter = itertools.count()
QUERIES = {"n": 0}


def _count(execute, sql, params, many, context):
    QUERIES["n"] = next(_counter) + 1
    return execute(sql, params, many, context)


def _install(sender, connection, **kwargs):
    if _count not in connection.execute_wrappers:
        connection.execute_wrappers.append(_count)


connection_created.connect(_install)

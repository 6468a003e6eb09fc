"""Which process holds which database connection: the server's process list (one row per client
connection, with its client port) matched to the local ports of a process tree (psutil)."""

from __future__ import annotations

import psutil
from django.db import connection


def process_tree(pid: int) -> list[int]:
    """A process and its descendants (gunicorn's master and its workers, celery and its children)."""
    try:
        parent = psutil.Process(pid)
        return [parent.pid, *(child.pid for child in parent.children(recursive=True))]
    except psutil.NoSuchProcess:
        return []


def ports_of(pids: list[int], server_port: int) -> set[int]:
    """Local ports of the TCP connections these processes hold to a server port."""
    ports = set()
    for pid in pids:
        try:
            for conn in psutil.Process(pid).net_connections(kind="tcp"):
                if conn.raddr and conn.raddr.port == server_port and conn.status == psutil.CONN_ESTABLISHED:
                    ports.add(conn.laddr.port)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return ports


def server_client_ports(cursor_connection=None) -> set[int]:
    """Client ports of every connection the database server holds open for the current database."""
    conn = cursor_connection or connection
    with conn.cursor() as cursor:
        cursor.execute("SELECT HOST FROM information_schema.PROCESSLIST WHERE DB = DATABASE()")
        rows = cursor.fetchall()
    return {int(host.rsplit(":", 1)[1]) for (host,) in rows if host and ":" in host}


def held_by(pid: int) -> int:
    """Database connections to the test database held now by the process tree of `pid`."""
    server_port = int(connection.settings_dict["PORT"] or 3306)
    return len(ports_of(process_tree(pid), server_port) & server_client_ports())

"""A threaded WSGI server with a fixed pool of worker threads (like `gunicorn --threads N`), used by
bench/chat_load.py. Each pool thread keeps its database connection (CONN_MAX_AGE), unlike
`runserver`, which starts a new thread, and so a new database connection, for every request.

    python bench/_pooled_wsgi.py --port 8123 --threads 8     (settings from the environment)
"""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 (wsgiref's signature)
        pass


class PooledWSGIServer(WSGIServer):
    request_queue_size = 256

    def __init__(self, address, handler, threads: int):
        super().__init__(address, handler)
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="wsgi")

    def process_request(self, request, client_address):
        self.pool.submit(self._handle, request, client_address)

    def _handle(self, request, client_address):
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()
    from django.core.wsgi import get_wsgi_application

    server = PooledWSGIServer(("127.0.0.1", args.port), QuietHandler, args.threads)
    server.set_app(get_wsgi_application())
    print(f"serving on 127.0.0.1:{args.port} with {args.threads} threads", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()

"""gunicorn's configuration for the API (`gunicorn -c api/gunicorn_conf.py`): `flokit up` and the
tests' gunicorn both run with it, so what is tested is what runs.

The worker is `api.workers.EdgeWorker`: gunicorn's threaded worker, whose event loop reads each
request whole before it is served, so idle and slow clients hold nothing but their bytes (see
its module). Its timeouts are settings: `FLOKIT_HEADER_TIMEOUT_S` (default 10 s for a
request head) and `FLOKIT_BODY_TIMEOUT_S` (15 s for its body), answered 408; the threads per
worker are `FLOKIT_WORKER_THREADS` (default 1: the loop serves each whole request itself, the
fastest on a small host; more for deployments whose requests wait on slow downstreams, see
docs/benchmarks.md "gunicorn worker classes").

Limits on what gunicorn parses before the API sees a request, sized to what the API takes:

- request line 8190 bytes (gunicorn's maximum; its default is 4094): ingest callbacks are GET
  requests carrying every parameter in the query string, and vendors' templates grow;
- 100 header fields of at most 8190 bytes each (gunicorn's defaults): the largest header the API
  reads is an `Authorization: Bearer` OIDC token of a Pub/Sub push (about 1 KB), `x-app-token`
  is at most 2048 characters, a provider signature header at most 1024.

What gunicorn refuses itself (414 request line too long, 431 header fields, 400 malformed, 501
transfer coding) is answered in the API's JSON error shape, `{"error": <HTTP reason phrase>,
"message": <what was wrong>}`, instead of gunicorn's HTML page.
"""

from __future__ import annotations

import resource
from typing import Any

from warehouse.settings import Settings

worker_class = "api.workers.EdgeWorker"
threads = Settings.from_env().worker_threads
# Connections one worker holds open (kept alive, or a request on its way in). Each costs a file
# descriptor and at most its buffered request; nginx in front limits them per address.
worker_connections = 4096
# Seconds a kept-alive connection may wait for its next request.
keepalive = 5
limit_request_line = 8190
limit_request_fields = 100
limit_request_field_size = 8190


def post_fork(server: Any, worker: Any) -> None:
    """Let a worker open as many descriptors as it may hold connections (the soft limit is often
    1024), within the hard limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = worker_connections + 256  # its connections plus the database's and the logs'
    if hard != resource.RLIM_INFINITY:
        wanted = min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))

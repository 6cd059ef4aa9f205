"""A fake provider API served by werkzeug on 127.0.0.1 from a thread of the test process.

Subclasses answer `_respond(request)`; `with fake:` serves it on a free port (`fake.url`) and
stops it on exit. No access log line per request (a benchmark makes tens of thousands).
"""

from __future__ import annotations

import threading
from typing import Any, Self

from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response


class _Quiet(WSGIRequestHandler):
    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass


class ThreadedFake:
    _server: BaseWSGIServer | None = None
    _thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "start the fake first"
        return f"http://127.0.0.1:{self._server.server_port}"

    def __enter__(self) -> Self:
        self._server = make_server("127.0.0.1", 0, self._app, threaded=True, request_handler=_Quiet)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._thread.join(5)
        self._server.server_close()

    def _app(self, environ: dict[str, Any], start_response: Any) -> Any:
        return self._respond(Request(environ))(environ, start_response)

    def _respond(self, request: Request) -> Response:
        raise NotImplementedError

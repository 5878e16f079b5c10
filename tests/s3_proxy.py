"""A proxy on loopback in front of an S3 server (moto's): it sends every request on as it came
and the server's answer back as it came, after showing the request to :meth:`S3Proxy.seen`.
The race tests run a rival write there (tests/checkpoint/test_races.py), the request count of
``benches/requests_per_commit.py`` counts it."""

from __future__ import annotations

import http.client
import http.server
from typing import Any


class S3Proxy(http.server.ThreadingHTTPServer):
    """Forwards every request to the S3 server on 127.0.0.1:``upstream``; serves on
    ``server_address``."""

    def __init__(self, upstream: int) -> None:
        super().__init__(("127.0.0.1", 0), _Forward)
        self.upstream = upstream

    def seen(self, method: str, path: str, headers: Any) -> None:
        """A request about to be sent on (in its own thread); a subclass watches here."""


class _Forward(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: S3Proxy

    def forward(self) -> None:
        body = self._body()
        self.server.seen(self.command, self.path, self.headers)
        headers = {k: v for k, v in self.headers.items() if k.lower() != "transfer-encoding"}
        if body is not None:
            headers["Content-Length"] = str(len(body))
        upstream = http.client.HTTPConnection("127.0.0.1", self.server.upstream, timeout=60)
        try:
            upstream.request(self.command, self.path, body=body, headers=headers)
            answer = upstream.getresponse()
            data = answer.read()
        finally:
            upstream.close()
        self.send_response(answer.status)
        for key, value in answer.getheaders():
            if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(key, value)
        size = answer.getheader("Content-Length") if self.command == "HEAD" else str(len(data))
        self.send_header("Content-Length", size or "0")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _body(self) -> bytes | None:
        """The request's body, also when it comes in chunks (sent on with its length)."""
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            out = bytearray()
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                out += self.rfile.read(size)
                self.rfile.readline()
            while self.rfile.readline().strip():
                pass  # trailers
            return bytes(out)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else None

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = forward

    def log_message(self, *args: Any) -> None:
        pass

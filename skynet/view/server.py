"""`skynet view`: the run viewer on 127.0.0.1, reading runs.db as it is written.

Pages (GET only):
    /                          every run of the project, and a form to compare two
    /run/RUN                   the run's pages (?a=&b= two candidates, ?x=&y= two objectives)
    /run/RUN/stamp             a short text that changes when the run records anything
    /run/RUN/call/SEQ          one model call's request and reply (fetched when opened)
    /compare/RUN_A/RUN_B       two runs side by side

A page of a running run reloads itself when its stamp changes. The server answers only
requests addressed to the loopback host (a page elsewhere cannot rebind a name to it and read the
runs), and only requests that carry this start's secret: the URL it prints ends in ?token=SECRET,
which sets a cookie (HttpOnly, SameSite=Strict, named for the port) and redirects to the page
without it, as Jupyter does. Another local account can reach 127.0.0.1 but not the secret, and is
answered 403 on every route. It is the standard library's ThreadingHTTPServer: one thread per
request, each reading the store under its lock.
"""

from __future__ import annotations

import hmac
import re
import secrets
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable
from http import HTTPStatus
from http.cookies import CookieError, SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO
from urllib.parse import parse_qs, parse_qsl, quote, unquote, urlencode, urlsplit

from skynet.errors import ConfigError
from skynet.runs.report import RunSummary, page, summarize
from skynet.runs.report import html_escape as _h  # short: it wraps every value on a page
from skynet.runs.store import RunStore
from skynet.view import DEFAULT_PORT
from skynet.view.compare import compare, render_compare_html
from skynet.view.pages import PAGE_CSS, SCRIPT, VIEWER_CSP, call_text_html, render_document

__all__ = ["DEFAULT_PORT", "Viewer", "serve"]

_PAGES_KEPT = 8  # rendered run pages kept, by (address, stamp)
_LOCAL_HOSTS = {"127.0.0.1", "localhost", "[::1]"}


class Viewer:
    """Renders the viewer's pages from a run store (one instance per server)."""

    def __init__(
        self,
        store: RunStore,
        *,
        project_dir: Path | None = None,
        current_hash: str | None = None,
    ) -> None:
        self.store = store
        self.project_dir = project_dir
        self.current_hash = current_hash
        self._lock = threading.Lock()
        self._pages: OrderedDict[tuple[str, str], str] = OrderedDict()

    def summary(self, run_id: str) -> RunSummary:
        run = self.store.get_run(run_id)
        return summarize(
            self.store,
            run_id,
            metric_hash=run.notes.get("metric_hash"),
            current_hash=self.current_hash,
            project_dir=self.project_dir,
        )

    def respond(self, target: str) -> tuple[int, str, str]:
        """(status, content type, body) for a GET of `target` (path and query)."""
        parts = urlsplit(target)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        path = [unquote(p) for p in parts.path.strip("/").split("/") if p]
        try:
            if not path:
                return _html(self.index())
            if path[0] == "run" and len(path) == 2:
                return _html(self.run_page(path[1], query, target))
            if path[0] == "run" and len(path) == 3 and path[2] == "stamp":
                return HTTPStatus.OK, "text/plain; charset=utf-8", self.store.stamp(path[1])
            if path[0] == "run" and len(path) == 4 and path[2] == "call" and path[3].isdigit():
                row = self.store.call(path[1], int(path[3]))
                if row is None:
                    return _missing(f"run {path[1]} has no call {path[3]}")
                return HTTPStatus.OK, "text/html; charset=utf-8", call_text_html(row)
            if path[0] == "compare" and len(path) == 3:
                return _html(self.comparison(path[1], path[2]))
            if path[0] == "compare" and len(path) == 1 and query.get("a") and query.get("b"):
                return _redirect(f"/compare/{quote(query['a'])}/{quote(query['b'])}")
        except ConfigError as exc:  # an unknown run: say so on the page
            return _missing(str(exc))
        return _missing(f"no page {parts.path}; the runs are listed at /")

    def run_page(self, run_id: str, query: dict[str, str], target: str) -> str:
        """A run's document, drawn again only when the run has recorded something since (its
        stamp, read before the records, so a page is never newer than the stamp it carries)."""
        stamp = self.store.stamp(run_id)
        key = (target, stamp)
        with self._lock:
            page = self._pages.get(key)
        if page is not None:
            return page
        page = render_document(
            self.store,
            self.summary(run_id),
            a=query.get("a"),
            b=query.get("b"),
            x=query.get("x"),
            y=query.get("y"),
            live=True,
            stamp=stamp,
        )
        with self._lock:
            self._pages[key] = page
            while len(self._pages) > _PAGES_KEPT:
                self._pages.popitem(last=False)
        return page

    def comparison(self, a: str, b: str) -> str:
        return render_compare_html(compare(self.store, self.summary(a), self.summary(b)), live=True)

    def index(self) -> str:
        runs = self.store.list_runs()
        rows = []
        for run in runs:
            try:
                s = self.summary(run.id)
            except ConfigError:
                continue
            base = s.seed.val_score if s.seed else None
            best = s.best.val_score if s.best else None
            rows.append(
                f'<tr><td><a class="mono" href="/run/{_h(quote(run.id))}">{_h(run.id)}</a></td>'
                f"<td>{_h(run.status)}</td><td>{_h(run.engine)}</td>"
                f"<td>{_h('-' if base is None else f'{base:.3f}')}</td>"
                f"<td>{_h('-' if best is None else f'{best:.3f}')}</td>"
                f"<td>{len(s.candidates)}</td><td>{_h(run.created)}</td></tr>"
            )
        options = "".join(f'<option value="{_h(r.id)}">{_h(r.id)}</option>' for r in runs)
        body = [
            "<h1>Skynet runs</h1>",
            f'<p class="meta">{_h(str(self.store.path))}</p>',
            '<table id="runs"><thead><tr><th>run</th><th>status</th><th>engine</th>'
            "<th>baseline val</th><th>best val</th><th>candidates</th><th>started</th></tr>"
            f"</thead><tbody>{''.join(rows)}</tbody></table>",
        ]
        if len(runs) >= 2:
            body.append(
                '<h2>Compare two runs</h2><form class="picker" method="get" action="/compare">'
                f'<label>A <select name="a">{options}</select></label> '
                f'<label>B <select name="b">{options}</select></label> '
                '<button type="submit">compare</button></form>'
            )
        if not runs:
            body.append("<p>No runs recorded yet; skynet run starts one.</p>")
        return page("Skynet runs", body, css=PAGE_CSS, script=SCRIPT, csp=VIEWER_CSP, nonce=True)


def _html(text: str) -> tuple[int, str, str]:
    return HTTPStatus.OK, "text/html; charset=utf-8", text


def _missing(text: str) -> tuple[int, str, str]:
    body = page("Not found", [f'<p class="err">{_h(text)}</p>', '<p><a href="/">All runs</a></p>'])
    return HTTPStatus.NOT_FOUND, "text/html; charset=utf-8", body


def _redirect(location: str) -> tuple[int, str, str]:
    return HTTPStatus.SEE_OTHER, f"redirect:{location}", ""


def _forbidden() -> tuple[int, str, str]:
    body = page(
        "Skynet viewer: open its URL",
        [
            "<h1>Open the URL skynet view printed</h1>",
            "<p>This viewer shows its runs only to whoever started it: open the address "
            "<code>skynet view</code> printed when it started (it ends in "
            "<code>?token=…</code>). A viewer started again prints a new one.</p>",
        ],
    )
    return HTTPStatus.FORBIDDEN, "text/html; charset=utf-8", body


# Sent with every answer: no page of the viewer may be framed by another (a local account's page
# on another port is the same site), and an answer that is not a whole page (a call's text, a
# stamp) runs nothing if opened on its own.
_HEADER_CSP = "frame-ancestors 'none'; base-uri 'none'"
_FRAGMENT_CSP = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'"


def _handler(
    viewer: Viewer, log: Callable[[str], None], token: str
) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "skynet-view"

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            host = re.sub(r":\d+$", "", self.headers.get("Host", ""))
            if host not in _LOCAL_HOSTS:
                self._send(HTTPStatus.FORBIDDEN, "text/plain; charset=utf-8", "loopback only\n")
                return
            cookie = f"skynet-view-{self.connection.getsockname()[1]}"  # the viewer's port
            parts = urlsplit(self.path)
            query = parse_qsl(parts.query, keep_blank_values=True)
            given = [v for k, v in query if k == "token"]
            if given:
                # The printed URL: set the cookie, then the same page without the secret (out of
                # the address bar and the history). A wrong secret sets nothing.
                if not _same(given[-1], token):
                    self._send(*_forbidden())
                    return
                rest = urlencode([(k, v) for k, v in query if k != "token"])
                # "/" + the path without its leading slashes: never "//host", another site.
                location = "/" + parts.path.lstrip("/") + (f"?{rest}" if rest else "")
                self._send(
                    *_redirect(location),
                    cookie=f"{cookie}={token}; Path=/; HttpOnly; SameSite=Strict",
                )
                return
            if not _same(_cookie(self.headers.get("Cookie", ""), cookie), token):
                self._send(*_forbidden())
                return
            try:
                status, kind, body = viewer.respond(self.path)
            except Exception as exc:  # noqa: BLE001 — one page failing must not stop the viewer
                log(f"skynet view: {self.path}: {type(exc).__name__}: {exc}")
                status, kind, body = _missing(f"this page failed: {type(exc).__name__}: {exc}")
                status = HTTPStatus.INTERNAL_SERVER_ERROR
            self._send(status, kind, body)

        def _send(self, status: int, kind: str, body: str, *, cookie: str = "") -> None:
            data = body.encode("utf-8", "replace")
            self.send_response(status)
            if kind.startswith("redirect:"):
                self.send_header("Location", kind.removeprefix("redirect:"))
                kind = "text/plain; charset=utf-8"
            if cookie:
                self.send_header("Set-Cookie", cookie)
            whole = body.startswith("<!DOCTYPE html>")  # its own policy, with its script's nonce
            self.send_header("Content-Security-Policy", _HEADER_CSP if whole else _FRAGMENT_CSP)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            try:
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the browser left

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass  # one line per request is noise; failures are said by do_GET

    return Handler


def _same(given: str | None, token: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


def _cookie(header: str, name: str) -> str | None:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(header)
    except CookieError:
        return None
    morsel = jar.get(name)
    return morsel.value if morsel is not None else None


def serve(
    viewer: Viewer,
    *,
    port: int = DEFAULT_PORT,
    first: str = "/",
    out: IO[str] | None = None,
    token: str | None = None,
) -> ThreadingHTTPServer:
    """Start serving on 127.0.0.1:`port` (0: any free port) and return the server; the caller
    runs `serve_forever()` and, at the end, `server_close()`.

    The URL it prints carries `token` (default: a fresh random secret for this start); every
    request without it, or without the cookie it sets, is answered 403.

    Raises:
        ConfigError: the port is not one (0 to 65535), is taken or cannot be bound.
    """
    out = out or sys.stdout
    token = token or secrets.token_urlsafe(32)
    if not 0 <= port <= 65535:
        raise ConfigError(
            f"--port {port} is not a port; give one from 1 to 65535, or 0 for any free one"
        )
    try:
        server = ThreadingHTTPServer(("127.0.0.1", port), _handler(viewer, _say(sys.stderr), token))
    except OSError as exc:
        raise ConfigError(
            f"skynet view cannot listen on 127.0.0.1:{port} ({exc.strerror or exc}); "
            "pick another port with --port N (0: any free one)"
        ) from exc
    server.daemon_threads = True
    url = f"http://127.0.0.1:{server.server_address[1]}{first}?token={token}"
    print(f"Skynet viewer: {url}  (Ctrl-C stops it)", file=out, flush=True)
    return server


def _say(stream: IO[str]) -> Callable[[str], None]:
    def say(text: str) -> None:
        print(text, file=stream, flush=True)

    return say

"""The view's HTTP server (aiohttp): the page, its assets, the frames as
server-sent events, and the actions (move a node, air capture on a live
lab; the cursor of a replay).

It listens on 127.0.0.1 only. Whatever reaches it is checked:
- every request must name this server in `Host` (127.0.0.1:PORT or
  localhost:PORT): a page of another site that rebinds its name to
  127.0.0.1 cannot read the page, and so not its secret;
- every request must carry the secret of this server start (compared in
  constant time): in the address the server prints (`?token=`), which the
  user who started it opens, in the cookie the page then sets, or in
  `X-Meshemu-Token`. Any local process can connect to 127.0.0.1, and this
  server runs as root: without the secret it reads nothing of the lab;
- every state-changing request (POST) must carry the secret in
  `X-Meshemu-Token` (a cookie goes with any request the browser makes, a
  header only with the page's own), a JSON body, and, when the browser
  sends one, an `Origin` of this server: another page open in the same
  browser cannot drive the lab.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import math
import secrets
import signal
import socket
from importlib import resources
from typing import Any, Awaitable, Callable

from aiohttp import web

from ..errors import MeshemuError
from .live import LiveSource
from .replay import ReplaySource
from .source import FrameSource

TOKEN_HEADER = "X-Meshemu-Token"
STATIC = resources.files(__package__) / "static"
VENDOR_HINT = "run ./setup.sh: it fetches the page's chart library (uPlot) into meshemu/view/static/vendor"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ViewServer:
    def __init__(self, source: FrameSource, port: int = 0):
        if not (STATIC / "vendor" / "uPlot.iife.min.js").is_file():
            raise MeshemuError(f"the view's assets are missing: {VENDOR_HINT}")
        self.source = source
        self.token = secrets.token_urlsafe(32)
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.socket.bind(("127.0.0.1", port))
        except OSError as exc:
            self.socket.close()
            raise MeshemuError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}") from None
        self.port = self.socket.getsockname()[1]
        self.origin = f"http://127.0.0.1:{self.port}"
        # The address to open: the only place the secret is shown.
        self.url = f"{self.origin}/?token={self.token}"
        # Cookies are per host, not per port: one name per server.
        self._cookie = f"meshemu-view-{self.port}"
        self._hosts = {f"127.0.0.1:{self.port}", f"localhost:{self.port}"}
        self._origins = {f"http://{host}" for host in self._hosts}

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._guard], client_max_size=64 * 1024)
        app.on_response_prepare.append(_security_headers)
        app.router.add_get("/", self._index)
        app.router.add_get("/api/meta", self._meta)
        app.router.add_get("/api/frames", self._frames)
        app.router.add_get("/api/daemons", self._daemons)
        app.router.add_post("/api/move", self._move)
        app.router.add_post("/api/capture", self._capture)
        app.router.add_post("/api/replay", self._replay)
        app.router.add_static("/static/", str(STATIC), follow_symlinks=False)
        return app

    async def serve(self, ready: Callable[[str], None]) -> None:
        """Serve until SIGINT or SIGTERM; a failure of the source ends the
        server with it (a page would otherwise freeze on its last frame)."""
        runner = web.AppRunner(self.app(), access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        site = web.SockSite(runner, self.socket)
        await site.start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        poller = asyncio.create_task(self.source.run())
        stopped = asyncio.create_task(stop.wait())
        ready(self.url)
        try:
            await asyncio.wait({poller, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if poller.done():
                poller.result()
        finally:
            poller.cancel()
            stopped.cancel()
            await runner.cleanup()

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.headers.get("Host") not in self._hosts:
            raise web.HTTPForbidden(text="this server answers only to 127.0.0.1 and localhost\n")
        if request.method in ("GET", "HEAD"):
            offered = (request.query.get("token"), request.cookies.get(self._cookie), request.headers.get(TOKEN_HEADER))
            if not any(self._is_token(value) for value in offered):
                raise web.HTTPForbidden(text="open the address `meshemu view` printed: it carries this server's "
                                             "secret\n")
        else:
            origin = request.headers.get("Origin")
            if origin is not None and origin not in self._origins:
                raise web.HTTPForbidden(text=f"requests from {origin} are refused\n")
            if not self._is_token(request.headers.get(TOKEN_HEADER)):
                raise web.HTTPForbidden(text=f"missing or wrong {TOKEN_HEADER}\n")
            if request.content_type != "application/json":
                raise web.HTTPUnsupportedMediaType(text="send JSON (Content-Type: application/json)\n")
        return await handler(request)

    def _is_token(self, value: str | None) -> bool:
        return value is not None and hmac.compare_digest(value.encode(), self.token.encode())

    async def _index(self, request: web.Request) -> web.Response:
        """The page, with the secret its POSTs carry, and the cookie that
        lets its assets, frames and counters through."""
        page = (STATIC / "index.html").read_text().replace("{{token}}", self.token)
        response = web.Response(text=page, content_type="text/html", headers={"Cache-Control": "no-store"})
        response.set_cookie(self._cookie, self.token, path="/", httponly=True, samesite="Strict")
        return response

    async def _meta(self, request: web.Request) -> web.Response:
        return web.json_response(self.source.meta)

    async def _frames(self, request: web.Request) -> web.StreamResponse:
        """Server-sent events: one `data:` line per frame."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"})
        await response.prepare(request)
        queue = self.source.listen()
        try:
            if self.source.latest is not None:
                await response.write(_event(self.source.latest))
            while True:
                await response.write(_event(await queue.get()))
        except ConnectionResetError:  # the page went away
            pass
        finally:
            self.source.forget(queue)
        return response

    def _live(self) -> LiveSource:
        if not isinstance(self.source, LiveSource):
            raise web.HTTPConflict(text="a replay shows what was recorded: it cannot change a lab\n")
        return self.source

    async def _daemons(self, request: web.Request) -> web.Response:
        if not isinstance(self.source, LiveSource):
            return web.json_response({})  # a recording has no daemon counters
        try:
            return web.json_response(self.source.daemons(request.query.get("node", "")))
        except MeshemuError as exc:
            raise web.HTTPNotFound(text=f"{exc}\n") from None

    async def _capture(self, request: web.Request) -> web.Response:
        """{"run": true} starts an air capture into a new file of the
        server's capture directory, {"run": false} stops it."""
        body = await _json_object(request)
        run = body.get("run")
        if not isinstance(run, bool):
            raise web.HTTPBadRequest(text='expected {"run": true} or {"run": false}\n')
        source = self._live()
        try:
            path = await asyncio.to_thread(source.capture, run)
        except MeshemuError as exc:
            raise web.HTTPBadRequest(text=f"{exc}\n") from None
        return web.json_response({"ok": True, "capturing": run, "path": None if path is None else str(path)})

    async def _replay(self, request: web.Request) -> web.Response:
        """{"t": SECONDS} moves the replay's cursor, {"playing": BOOL} plays
        or pauses it."""
        body = await _json_object(request)
        t, playing = body.get("t"), body.get("playing")
        if not (t is None or (isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t))) \
                or not (playing is None or isinstance(playing, bool)):
            raise web.HTTPBadRequest(text='expected {"t": SECONDS, "playing": true|false} (either may be left out)\n')
        if not isinstance(self.source, ReplaySource):
            raise web.HTTPConflict(text="this view is live: there is nothing to replay\n")
        return web.json_response(self.source.seek(None if t is None else float(t), playing))

    async def _move(self, request: web.Request) -> web.Response:
        body = await _json_object(request)
        node, x, y = body.get("node"), body.get("x"), body.get("y")
        if not isinstance(node, str) or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (x, y)):
            raise web.HTTPBadRequest(text='expected {"node": NAME, "x": METRES, "y": METRES}\n')
        try:
            position = await asyncio.to_thread(self._live().move, node, float(x), float(y))
        except MeshemuError as exc:
            raise web.HTTPBadRequest(text=f"{exc}\n") from None
        return web.json_response({"ok": True, "node": node, "position": position})


async def _security_headers(request: web.Request, response: web.StreamResponse) -> None:
    """The page loads nothing from elsewhere, may not be framed and names
    its address (with the secret) to nobody."""
    response.headers["Content-Security-Policy"] = "default-src 'self'; frame-ancestors 'none'"
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"


async def _json_object(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError:
        raise web.HTTPBadRequest(text="the body is not JSON\n") from None
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(text="the body must be a JSON object\n")
    return body


def _event(frame: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(frame, separators=(",", ":")).encode() + b"\n\n"

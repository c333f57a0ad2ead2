"""The view's server without a lab (no root), serving a replay: it listens
on 127.0.0.1 only, refuses what it cannot authenticate, answers bad
requests with a clear error and goes on serving, and ends with its source
when the source fails."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest

from meshemu.view.replay import ReplaySource
from meshemu.view.server import TOKEN_HEADER, ViewServer
from meshemu.view.source import FrameSource

from test_view_flows import META, recorded_frame, write_recording


@pytest.fixture
def replay(tmp_path) -> ReplaySource:
    path = tmp_path / "view.jsonl.gz"
    write_recording(path, [{"meta": META}, recorded_frame(0.0), recorded_frame(0.5)], [[[0.5, 8000.0, 3.0, 0.0]]])
    return ReplaySource(path, "exp run r")


async def serving(server: ViewServer, check) -> None:
    """Run `check(session, token)` against the server while it serves."""
    listening = asyncio.Event()
    serve = asyncio.create_task(server.serve(lambda url: listening.set()))
    await asyncio.wait_for(listening.wait(), 10)
    try:
        # The cookie of 127.0.0.1 (aiohttp keeps cookies of IP addresses only when told).
        async with aiohttp.ClientSession(server.origin, cookie_jar=aiohttp.CookieJar(unsafe=True)) as session:
            async with session.get("/", params={"token": server.token}) as response:
                page = await response.text()
            token = page.split('name="meshemu-token" content="')[1].split('"')[0]
            await check(session, token)
    finally:
        serve.cancel()
        with pytest.raises(asyncio.CancelledError):
            await serve


async def answer(session: aiohttp.ClientSession, path: str, body: bytes, **headers: str) -> tuple[int, str]:
    async with session.post(path, data=body, headers={"Content-Type": "application/json", **headers}) as response:
        return response.status, await response.text()


def test_the_server_listens_on_loopback_and_serves_the_page_and_frames(replay):
    server = ViewServer(replay)

    async def check(session, token):
        assert server.socket.getsockname()[0] == "127.0.0.1"
        async with session.get("/") as response:
            assert response.headers["Content-Security-Policy"].startswith("default-src 'self'")
        async with session.get("/api/meta") as response:
            assert (await response.json())["replay"] == {"start": 0.0, "end": 0.5}
        async with session.get("/api/frames") as response:
            first = json.loads((await response.content.readline()).removeprefix(b"data: "))
        assert first["t"] == 0.0 and first["replay"] == {"t": 0.0, "playing": False}

    asyncio.run(serving(server, check))


def test_nothing_is_read_without_the_secret_and_the_page_hands_its_cookie_on(replay):
    server = ViewServer(replay)
    paths = ("/", "/api/meta", "/api/frames", "/api/daemons?node=n0", "/static/view.js")

    async def check(session, token):
        assert server.url == f"{server.origin}/?token={token}"
        async with aiohttp.ClientSession(server.origin, cookie_jar=aiohttp.CookieJar(unsafe=True)) as stranger:
            for path in paths:
                for params in ({}, {"token": token[:-1]}):
                    async with stranger.get(path, params=params) as response:
                        assert response.status == 403, (path, params)
                        assert "open the address `meshemu view` printed" in await response.text()
            async with stranger.get("/", params={"token": token}) as response:
                assert response.status == 200
                assert response.headers["Referrer-Policy"] == "no-referrer"
                cookie = response.cookies[f"meshemu-view-{server.port}"]
            assert cookie.value == token and cookie["httponly"] and cookie["samesite"] == "Strict"
            for path in paths[1:]:  # with the page's cookie
                async with stranger.get(path) as response:
                    assert response.status == 200, path
        async with aiohttp.ClientSession(server.origin) as script:  # no cookies: the header
            async with script.get("/api/meta", headers={TOKEN_HEADER: token}) as response:
                assert response.status == 200

    asyncio.run(serving(server, check))


def test_a_post_is_refused_without_the_secret_from_another_origin_or_host(replay):
    server = ViewServer(replay)
    seek = json.dumps({"t": 0.5}).encode()

    async def check(session, token):
        for headers in ({}, {TOKEN_HEADER: token + "x"}, {TOKEN_HEADER: token, "Origin": "http://evil.example"},
                        {TOKEN_HEADER: token, "Host": "evil.example"}):
            assert (await answer(session, "/api/replay", seek, **headers))[0] == 403, headers
        async with session.get("/", headers={"Host": "evil.example"}) as response:
            assert response.status == 403  # a rebound name cannot read the page and its secret
        assert replay.cursor == 0.0
        assert await answer(session, "/api/replay", seek, **{TOKEN_HEADER: token, "Origin": server.origin}) \
            == (200, '{"t": 0.5, "playing": false}')

    asyncio.run(serving(server, check))


def test_bad_requests_get_a_clear_error_and_the_server_goes_on(replay):
    server = ViewServer(replay)

    async def check(session, token):
        secret = {TOKEN_HEADER: token}
        for path, body, status, says in (
                ("/api/replay", b"{", 400, "the body is not JSON"),
                ("/api/replay", b"\xff\xfe", 400, "the body is not JSON"),
                ("/api/replay", b"[1]", 400, "the body must be a JSON object"),
                ("/api/replay", b'{"t": "soon"}', 400, 'expected {"t": SECONDS'),
                ("/api/replay", b'{"t": NaN}', 400, 'expected {"t": SECONDS'),
                ("/api/replay", b'{"playing": 1}', 400, 'expected {"t": SECONDS'),
                ("/api/move", b'{"node": "n0", "x": true, "y": 0}', 400, 'expected {"node": NAME'),
                ("/api/move", b'{"node": "n0", "x": 1, "y": 0}', 409, "a replay shows what was recorded"),
                ("/api/capture", b'{"run": "yes"}', 400, 'expected {"run": true}'),
                ("/api/capture", b'{"run": true}', 409, "a replay shows what was recorded"),
                ("/api/replay", b"{" * 70_000, 413, "")):
            status_now, text = await answer(session, path, body, **secret)
            assert status_now == status and says in text, (path, body[:20], status_now, text)
        plain = {"Content-Type": "text/plain", **secret}
        async with session.post("/api/replay", data=b"{}", headers=plain) as response:
            assert response.status == 415
        async with session.get("/api/daemons", params={"node": "n0"}) as response:
            assert await response.json() == {}  # a recording has no daemon counters
        async with session.get("/api/meta") as response:
            assert response.status == 200

    asyncio.run(serving(server, check))


def test_the_server_ends_with_its_source_when_the_source_fails():
    class Failing(FrameSource):
        async def run(self) -> None:
            raise RuntimeError("the source broke")

    with pytest.raises(RuntimeError, match="the source broke"):
        asyncio.run(ViewServer(Failing({})).serve(lambda url: None))

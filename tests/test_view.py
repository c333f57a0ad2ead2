"""`meshemu view` in a real browser (Debian's chromium, headless, driven by
selenium) on a chain lab with AODV, and the replay of a short recorded run
(root)."""

from __future__ import annotations

import json
import re
import select
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import dpkt
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from meshemu.experiment.results import read_records
from meshemu.lab import Lab

pytestmark = pytest.mark.root

LAB = "tview"
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")


def meshemu(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "meshemu", *args], capture_output=True, text=True, timeout=timeout)


# chain7 with AODV: its daemon's counters are on the page too.
CHAIN_AODV = """\
name: tview
profile: ns2-wavelan
routing: aodv
generate: {kind: chain, n: 8, spacing: 200m}
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    topology = tmp_path_factory.mktemp("view") / "chain-aodv.yaml"
    topology.write_text(CHAIN_AODV)
    up = meshemu("up", str(topology), "--name", LAB)
    assert up.returncode == 0, up.stderr
    try:
        yield Lab.attach(LAB)
    finally:
        down = meshemu("down", LAB)
        assert down.returncode == 0, down.stderr


@contextmanager
def serving(*args: str):
    """`meshemu view ARGS...`: (the address it printed, with its secret; its PID) while it runs."""
    process = subprocess.Popen([sys.executable, "-m", "meshemu", "view", *args], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([process.stdout], [], [], 30)
        assert ready, "meshemu view printed no address within 30 s"
        line = process.stdout.readline()
        assert "http://127.0.0.1:" in line, line + process.stderr.read()
        yield re.search(r"http://127\.0\.0\.1:\d+/\?token=[\w-]+", line).group(), process.pid
    finally:
        process.terminate()
        assert process.wait(10) == 0


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    return tmp_path_factory.mktemp("captures")


@pytest.fixture(scope="module")
def view(lab, captures):
    """`meshemu view` of the lab, showing the flow n0 → n3: (its URL, its PID)."""
    with serving("--lab", LAB, "--flow", "n0:n3", "--captures", str(captures)) as served:
        yield served


@pytest.fixture(scope="module")
def browser():
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        pytest.fail("chromium and chromium-driver are missing: run ./setup.sh")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,900"):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=str(CHROMEDRIVER)))
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def page(view, browser):
    url, _ = view
    browser.get(url)
    wait_for(browser, lambda d: d.execute_script("return window.meshemuView.frame !== null"))
    return browser


def wait_for(driver, condition, timeout: float = 15):
    return WebDriverWait(driver, timeout, poll_frequency=0.1).until(condition)


def screen_position(driver, node: str) -> tuple[float, float]:
    transform = driver.find_element(By.CSS_SELECTOR, f'g.node[data-node="{node}"]').get_attribute("transform")
    x, y = transform.removeprefix("translate(").removesuffix(")").split(",")
    return float(x), float(y)


def px_per_metre(driver) -> float:
    """The map's scale, from its scale bar."""
    scale = driver.find_element(By.ID, "scale-text")
    return float(scale.get_attribute("data-px")) / float(scale.get_attribute("data-metres"))


def link_pairs(driver) -> set[str]:
    return set(driver.execute_script(
        "return [...document.querySelectorAll('#links line')]"
        ".filter(l => l.getAttribute('visibility') === 'visible').map(l => l.dataset.pair)"))


def origin(url: str) -> str:
    """http://127.0.0.1:PORT of the address `meshemu view` printed."""
    return url.split("/?", 1)[0]


def status(request: urllib.request.Request | str) -> int:
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def post(url: str, body: dict, headers: dict[str, str], action: str = "api/move") -> int:
    return status(urllib.request.Request(f"{origin(url)}/{action}", data=json.dumps(body).encode(), method="POST",
                                         headers={"Content-Type": "application/json", **headers}))


def token_of(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        page = response.read().decode()
    return page.split('name="meshemu-token" content="')[1].split('"')[0]


def test_the_page_shows_every_node_to_scale_and_the_chain_links(page):
    names = [element.get_attribute("data-node") for element in page.find_elements(By.CSS_SELECTOR, "g.node")]
    assert names == [f"n{i}" for i in range(8)]
    wait_for(page, lambda d: link_pairs(d) == {f"n{i} n{i + 1}" for i in range(7)})
    # n0 and n1 are 200 m apart: as many pixels as the scale bar gives 200 m.
    (x0, y0), (x1, y1) = screen_position(page, "n0"), screen_position(page, "n1")
    assert abs((x1 - x0) - 200 * px_per_metre(page)) < 0.5 and y0 == y1


def test_counters_and_link_delivery_appear_after_traffic(page, lab):
    lab["n0"].run(["ping", "-c", "5", "-i", "0.2", "n2"], check=True, timeout=30)
    # n1 relays: its air was busy, and the n0-n1 link delivered every unicast frame.
    wait_for(page, lambda d: d.execute_script(
        "const s = window.meshemuView; return s.history[1].series[0].some(v => v > 0) && "
        "s.frame.links.some(([a, b, ratio]) => a === 0 && b === 1 && ratio === 1)"))
    assert len(page.find_elements(By.CSS_SELECTOR, '#air-table tr[data-node="n1"] .uplot')) == 4


def test_the_busy_heat_covers_what_the_nodes_sense_and_shows_a_busy_relay(page, lab):
    def heat_at(driver, node: str | None) -> list[int]:
        """The heat's RGBA under a node (or in the map's top-left corner)."""
        x, y = screen_position(driver, node) if node else (1, 1)
        return driver.execute_script(
            "const c = document.getElementById('heat'), cell = c.clientWidth / c.width;"
            "return [...c.getContext('2d').getImageData(Math.floor(arguments[0] / cell),"
            " Math.floor(arguments[1] / cell), 1, 1).data]", x, y)

    assert heat_at(page, "n3")[3] > 0
    assert heat_at(page, None)[3] == 0  # over 550 m from every node: no node senses there
    # A flood of pings through n1: the heat under it turns from idle blue-grey towards red.
    ping = lab["n0"].spawn(["ping", "-c", "100", "-i", "0.05", "-s", "1400", "n2"])
    try:
        wait_for(page, lambda d: (lambda rgba: rgba[0] > rgba[2] + 10)(heat_at(d, "n1")), 10)
    finally:
        ping.terminate()
        ping.wait()


def test_selecting_a_node_shows_its_ranges_and_neighbours(page):
    page.find_element(By.CSS_SELECTOR, 'g.node[data-node="n3"] circle').click()
    wait_for(page, lambda d: d.find_element(By.ID, "detail").is_displayed())
    # The panel is redrawn with every frame: read it in one go.
    neighbours, cs_only, radius = page.execute_script(
        "return [[...document.querySelectorAll('#neighbours tr[data-node]')].map(r => r.dataset.node),"
        " document.getElementById('cs-only').textContent,"
        " Number(document.querySelector('#ranges circle.rx').getAttribute('r'))]")
    assert set(neighbours) == {"n2", "n4"}
    assert cs_only == "in carrier-sense range only: n1, n5"
    assert abs(radius / px_per_metre(page) - 250) < 1  # ns2-wavelan's receive range


def test_the_selected_node_shows_its_routing_daemons_counters(page, lab):
    lab["n0"].run(["ping", "-c", "2", "-i", "0.2", "n3"], check=True, timeout=30)
    page.find_element(By.CSS_SELECTOR, 'g.node[data-node="n0"] circle').click()
    # aodvd rewrites its counters every second: n0 started a discovery for n3.
    wait_for(page, lambda d: d.execute_script(
        "const row = document.querySelector('#daemons table[data-daemon=aodvd] tr[data-key=discoveries_started]');"
        "return row !== null && Number(row.cells[1].textContent) >= 1"))


def test_a_move_from_the_cli_moves_the_node_and_removes_its_links(page, lab):
    before = screen_position(page, "n7")
    moved = meshemu("move", "n7", "1400", "600", "--lab", LAB)
    assert moved.returncode == 0, moved.stderr
    wait_for(page, lambda d: screen_position(d, "n7")[1] < before[1] - 10)
    wait_for(page, lambda d: not any("n7" in pair.split() for pair in link_pairs(d)))
    assert not any(link["in_rx_range"] for link in lab.links()["links"] if 7 in (link["a"], link["b"]))
    lab.move("n7", 1400, 0)
    wait_for(page, lambda d: "n6 n7" in link_pairs(d))


def test_dragging_a_node_moves_it_in_the_lab(page, lab):
    scale = px_per_metre(page)
    circle = page.find_element(By.CSS_SELECTOR, 'g.node[data-node="n5"] circle')
    ActionChains(page).click_and_hold(circle).move_by_offset(0, -40).move_by_offset(0, -40).release().perform()
    expected_y = 80 / scale
    deadline = time.monotonic() + 10
    while abs(lab.positions()["n5"][1] - expected_y) > 2 / scale and time.monotonic() < deadline:
        time.sleep(0.1)
    position = lab.positions()["n5"]
    assert abs(position[1] - expected_y) <= 2 / scale and abs(position[0] - 1000) <= 2 / scale
    lab.move("n5", 1000, 0)


def test_an_action_the_server_refuses_stays_on_the_page_with_its_reason(page):
    page.execute_script('act("/api/move", {node: "n99", x: 0, y: 0})')
    time.sleep(1)  # four frames: each renews the status line, not the action's error
    error = page.find_element(By.ID, "action-error").text
    assert error == "Error: /api/move: 400 lab 'tview' has no node 'n99'", error
    page.execute_script('act("/api/move", {node: "n4", x: 800, y: 0})')
    wait_for(page, lambda d: d.find_element(By.ID, "action-error").text == "")


def test_nothing_is_read_without_the_secret(view):
    url, _ = view
    for path in ("/", "/api/meta", "/api/frames", "/api/daemons?node=n0", "/static/view.js"):
        assert status(origin(url) + path) == 403, path
    assert status(origin(url) + "/api/daemons?node=n0&token=" + token_of(url)) == 200


def test_a_post_without_the_secret_or_from_another_origin_is_refused(view, lab):
    url, _ = view
    token = token_of(url)
    move = {"node": "n4", "x": 800, "y": 300}
    assert post(url, move, {}) == 403
    assert post(url, move, {"X-Meshemu-Token": token[:-1] + ("A" if token[-1] != "A" else "B")}) == 403
    assert post(url, move, {"X-Meshemu-Token": token, "Origin": "http://evil.example"}) == 403
    assert post(url, move, {"X-Meshemu-Token": token, "Host": "evil.example"}) == 403
    assert lab.positions()["n4"][:2] == [800.0, 0.0]
    assert post(url, move, {"X-Meshemu-Token": token, "Origin": origin(url)}) == 200
    assert lab.positions()["n4"][:2] == [800.0, 300.0]
    lab.move("n4", 800, 0)


def test_the_page_loads_nothing_from_elsewhere(page, view):
    url, _ = view
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.headers["Content-Security-Policy"].startswith("default-src 'self'")
    resources = page.execute_script("return performance.getEntriesByType('resource').map(r => r.name)")
    assert any(name.endswith("/uPlot.iife.min.js") for name in resources)
    assert all(name.startswith(origin(url) + "/") for name in resources)


def test_the_server_listens_on_loopback_only(view):
    url, pid = view
    port = int(origin(url).rsplit(":", 1)[1])
    inodes = {Path(f"/proc/{pid}/fd/{fd}").readlink().name.strip("socket:[]")
              for fd in (p.name for p in Path(f"/proc/{pid}/fd").iterdir())
              if Path(f"/proc/{pid}/fd/{fd}").readlink().name.startswith("socket:")}
    listening = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN, a socket of the view
                listening.append(fields[1])
    assert listening == [f"0100007F:{port:04X}"]  # 127.0.0.1:PORT and nothing else


def flow_route(driver, name: str = "n0→n3") -> tuple[str, str, bool]:
    """A flow's route on the map: its nodes, whether it reaches the
    destination, whether it is highlighted as just changed."""
    return tuple(driver.execute_script(
        "const l = document.querySelector(`#paths polyline[data-flow=\"${arguments[0]}\"]`);"
        "return [l.dataset.route, l.dataset.reached, l.classList.contains('changed')]", name))


def test_a_flow_is_drawn_along_its_route_and_follows_an_aodv_repair(page, lab):
    ping = lab["n0"].spawn(["ping", "-i", "0.2", "-w", "90", "n3"])
    try:
        wait_for(page, lambda d: flow_route(d)[:2] == ("n0 n1 n2 n3", "true"), 30)
        # The relay n2 leaves: no node links n1 to n3 any more, the route breaks.
        lab.move("n2", 400, 700)
        wait_for(page, lambda d: flow_route(d)[1] == "false", 30)
        assert "no route beyond" in page.find_element(By.CSS_SELECTOR, '.flow[data-flow="n0→n3"] .route').text
        # n5 comes between n1 and n3: AODV's next discovery finds the detour,
        # highlighted on the map as it appears.
        lab.move("n5", 400, 50)
        wait_for(page, lambda d: flow_route(d) == ("n0 n1 n5 n3", "true", True), 40)
        log = [item.text for item in page.find_elements(By.CSS_SELECTOR, '.flow[data-flow="n0→n3"] ol li')]
        assert len(log) >= 2 and log[0].endswith("⇒ n0 → n1 → n5 → n3"), log
    finally:
        ping.terminate()
        ping.wait()
        lab.move("n2", 400, 0)
        lab.move("n5", 1000, 0)


def test_an_air_capture_started_from_the_page_writes_a_pcap(page, lab, captures):
    page.find_element(By.ID, "capture").click()
    wait_for(page, lambda d: d.execute_script("return window.meshemuView.frame.capture") is not None)
    path = Path(page.execute_script("return window.meshemuView.frame.capture"))
    assert path.parent == captures.resolve()
    lab["n0"].run(["ping", "-c", "3", "-i", "0.2", "n1"], check=True, timeout=30)
    page.find_element(By.ID, "capture").click()
    wait_for(page, lambda d: d.execute_script("return window.meshemuView.lastCapture") == str(path))
    wait_for(page, lambda d: d.execute_script("return window.meshemuView.frame.capture") is None)
    with path.open("rb") as capture:
        frames = list(dpkt.pcap.Reader(capture))
    assert len(frames) >= 6  # three echo requests and replies, at least, with their ACKs and RTS/CTS


def test_a_capture_request_without_the_secret_is_refused(view, captures):
    url, _ = view
    before = set(captures.iterdir())
    assert post(url, {"run": True}, {}, "api/capture") == 403
    assert post(url, {"run": True}, {"X-Meshemu-Token": "guess"}, "api/capture") == 403
    time.sleep(0.5)
    assert set(captures.iterdir()) == before


REPLAYED = """\
description: a short run for the view's replay (n3 moves away and up)
topology:
  profile: ns2-wavelan
  routing: aodv
  generate: {kind: chain, n: 4, spacing: 200m}
  nodes:
    n3: {mobility: {model: setdest, moves: [{at: 6s, to: [500m, 150m], speed: 50m/s}]}}
duration: 12s
warmup: 2s
seed: 1
traffic:
  - {kind: udp, name: cbr, src: n0, dst: n3, rate: 100kbps, packet: 500B, start: 1s}
measure: {view: 500ms, drain: 1s}
"""


@pytest.fixture(scope="module")
def recorded_run(tmp_path_factory):
    """A short recorded run: (its results directory, its run id)."""
    base = tmp_path_factory.mktemp("replay")
    (base / "short.yaml").write_text(REPLAYED)
    run = meshemu("run", str(base / "short.yaml"), "--out", str(base / "results"), timeout=180)
    assert run.returncode == 0, run.stderr
    [record] = read_records(base / "results" / "runs.jsonl")
    return base / "results", record["run_id"]


def metres_from(driver, a: str, b: str) -> tuple[float, float]:
    """Where node b is drawn from node a, in metres by the scale bar (east, north)."""
    scale = px_per_metre(driver)
    (xa, ya), (xb, yb) = screen_position(driver, a), screen_position(driver, b)
    return (xb - xa) / scale, (ya - yb) / scale


def seek(driver, t: float) -> None:
    driver.execute_script("const s = document.getElementById('slider'); s.value = arguments[0];"
                          "s.dispatchEvent(new Event('input'))", t)


def test_the_replay_of_a_recorded_run_shows_its_flow_and_its_slider_moves_the_nodes(recorded_run, browser):
    results, run_id = recorded_run
    with serving(str(results), "--run", run_id) as (url, _):
        browser.get(url)
        wait_for(browser, lambda d: d.execute_script("return window.meshemuView.frame !== null"))
        start, end = browser.execute_script("const r = window.meshemuView.meta.replay; return [r.start, r.end]")
        assert end - start > 10
        # Before n3's move and after it: the slider moves the node on the map.
        seek(browser, start)
        wait_for(browser, lambda d: d.execute_script("return window.meshemuView.frame.pos[3]") == [600, 0])
        assert metres_from(browser, "n2", "n3") == pytest.approx((200, 0), abs=1)
        seek(browser, end)
        wait_for(browser, lambda d: d.execute_script("return window.meshemuView.frame.pos[3]") == [500, 150])
        assert metres_from(browser, "n2", "n3") == pytest.approx((100, 150), abs=1)
        # The flow along its route, with the goodput its receiver reported.
        assert flow_route(browser, "cbr")[:2] == ("n0 n1 n2 n3", "true")
        seek(browser, (start + end) / 2)
        wait_for(browser, lambda d: d.execute_script(
            "const c = document.querySelector('.flow[data-flow=cbr] [data-chart=goodput]');"
            "return c.dataset.value !== '' && Number(c.dataset.value) > 50000"))
        # Play runs the cursor on.
        browser.find_element(By.ID, "play").click()
        t = browser.execute_script("return window.meshemuView.frame.replay.t")
        wait_for(browser, lambda d: d.execute_script("return window.meshemuView.frame.replay.t") > t + 1)


"""The cost of `meshemu view` on large labs (needs root, the TAP medium,
Debian's chromium and chromium-driver, and selenium from the test extras).

    python -m meshemu.bench.view [--seconds 30] [--runs 3] [--screenshots DIR]

For grid13 (169 static nodes) and random100 with random-waypoint mobility
(100 nodes moving at 1-20 m/s), each run brings the lab up, pings from
the first node to the last (10 per second, 1000 bytes), starts `meshemu view`, opens the page in headless chromium and, after a warm-up,
reads what the page measured of itself over --seconds: frames drawn, the
time to draw one (JavaScript, from a frame's arrival to the SVG and
sparklines updated), the browser's frame rate (requestAnimationFrame ticks
per second) and the frames' size; and on the server side the time of one
snapshot (the medium's stats, positions and links requests) and of one
round of route reading for the ping's flow (the page shows it along its
route: `ip -j route show` in each node on the path); then records the lab
for --record-seconds as the runner does with `measure: {view: 500ms}` and
gives the recording's size per node and minute. Prints min / median / max
over the runs. --screenshots: the page of each case's first run, with its
middle node selected, as PNG in DIR.
"""

from __future__ import annotations

import argparse
import re
import select
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from ..lab import Lab
from ..topology import load_topology
from ..view.flows import ViewFlow
from ..view.frames import FrameMaker
from ..view.live import snapshot
from ..view.record import Recorder
from ..view.routes import RouteReader

TOPOLOGIES = Path(__file__).resolve().parents[3] / "topologies"
MOVING_100 = """\
name: moving100
profile: ns2-wavelan
seed: 1
routing: static
area: {min: [0m, 0m], max: [1000m, 1000m]}
generate: {kind: random, n: 100}
mobility: {model: random_waypoint, speed: [1m/s, 20m/s], pause: 0s, steady_state: true}
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m meshemu.bench.view", description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--screenshots", type=Path, metavar="DIR")
    parser.add_argument("--record-seconds", type=float, default=30.0)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        moving = Path(scratch) / "moving100.yaml"
        moving.write_text(MOVING_100)
        cases = [("grid13", "169 static nodes", TOPOLOGIES / "grid13.yaml"),
                 ("moving100", "100 nodes, random waypoint 1-20 m/s", moving)]
        options = webdriver.ChromeOptions()
        options.binary_location = "/usr/bin/chromium"
        for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,900"):
            options.add_argument(argument)
        for name, title, topology in cases:
            figures: dict[str, list[float]] = {}
            for run in range(args.runs):
                screenshot = args.screenshots / f"view-{name}.png" if args.screenshots and run == 0 else None
                lab = Lab(load_topology(topology), "benchview")
                with lab:
                    nodes = list(lab)
                    nodes[0].spawn(["ping", "-q", "-i", "0.1", "-s", "1000", nodes[-1].name])
                    found = _one_run(lab, options, args.seconds, screenshot)
                    found.update(_recording(lab, args.record_seconds, Path(scratch)))
                    for key, value in found.items():
                        figures.setdefault(key, []).append(value)
            print(f"{name} ({title}): min / median / max over {args.runs} runs of {args.seconds:.0f} s")
            for key, values in figures.items():
                print(f"  {key:34s} {min(values):9.2f} {statistics.median(values):9.2f} {max(values):9.2f}")
    return 0


def _one_run(lab: Lab, options: webdriver.ChromeOptions, seconds: float, screenshot: Path | None) -> dict[str, float]:
    snapshot_ms = []
    maker = FrameMaker(list(lab.nodes))
    for _ in range(20):
        started = time.perf_counter()
        maker.frame(snapshot(lab))
        snapshot_ms.append((time.perf_counter() - started) * 1e3)
    first, last = list(lab.nodes)[0], list(lab.nodes)[-1]
    reader, route_ms = RouteReader(lab), []
    for _ in range(20):
        started = time.perf_counter()
        [path] = reader.paths([(first, last)])
        route_ms.append((time.perf_counter() - started) * 1e3)
    view = subprocess.Popen([sys.executable, "-m", "meshemu", "view", "--lab", lab.name, "--flow", f"{first}:{last}"],
                            stdout=subprocess.PIPE, text=True)
    driver = None
    try:
        ready, _, _ = select.select([view.stdout], [], [], 60)
        match = re.search(r"(http://127\.0\.0\.1:\d+)/\?token=([\w-]+)", view.stdout.readline() if ready else "")
        if match is None:
            raise SystemExit("meshemu view printed no address")
        url, (origin, token) = match.group(), match.groups()
        with urllib.request.urlopen(f"{origin}/api/frames?token={token}", timeout=10) as stream:
            frame_bytes = len(next(line for line in stream if line.startswith(b"data: ")))
        driver = webdriver.Chrome(options=options, service=Service(executable_path="/usr/bin/chromedriver"))
        driver.get(url)
        time.sleep(5)  # warm-up: the page builds its elements and sparklines
        driver.execute_script("const p = window.meshemuView.perf; p.draws = 0; p.drawMs = 0; p.maxMs = 0; "
                              "p.samples = []; p.ticks = 0; p.since = performance.now();")
        time.sleep(seconds)
        perf = driver.execute_script("const p = window.meshemuView.perf; return {draws: p.draws, samples: p.samples, "
                                     "ticks: p.ticks, elapsed: performance.now() - p.since};")
        if screenshot is not None:
            middle = list(lab.nodes)[len(lab) // 2]
            driver.find_element(By.CSS_SELECTOR, f'g.node[data-node="{middle}"] circle').click()
            time.sleep(3)
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            driver.save_screenshot(str(screenshot))
    finally:
        if driver is not None:
            driver.quit()
        view.terminate()
        view.wait(10)
    return {"frames drawn per second": perf["draws"] / (perf["elapsed"] / 1e3),
            "draw ms, median": statistics.median(perf["samples"]),
            "draw ms, max": max(perf["samples"]),
            "browser frame rate (fps)": perf["ticks"] / (perf["elapsed"] / 1e3),
            "frame size (kB)": frame_bytes / 1e3,
            "server snapshot ms, median": statistics.median(snapshot_ms),
            "route reading ms per round, median": statistics.median(route_ms),
            "route tables read per round": reader.tables_read / len(route_ms),
            "nodes on the flow's path": float(len(path.nodes)),
            "path reaches the destination (1 yes)": float(path.reached)}


def _recording(lab: Lab, seconds: float, scratch: Path) -> dict[str, float]:
    """The size of a recording of the lab (one frame every 0.5 s, the ping's
    flow along its route), bytes per node and minute."""
    nodes = list(lab.nodes)
    path = scratch / "view.jsonl.gz"
    recorder = Recorder(lab, [ViewFlow("ping", nodes[0], nodes[-1])], path, 0.5)
    recorder.start()
    time.sleep(seconds)
    recorder.stop()
    return {"recording bytes per node per minute": path.stat().st_size / len(nodes) / (seconds / 60)}


if __name__ == "__main__":
    sys.exit(main())

"""The ns-2 driver: `meshemu run FILE --driver ns2` runs each planned run in
ns-2.35, the papers' own simulator, and records it beside the lab's runs.

| module | what |
|---|---|
| `support.py` | what ns-2 can run: the refusals, located in the file, before anything starts |
| `scenario.py` | a run -> an ns-2.35 Tcl scenario (radio, nodes, movement, agents, samples) |
| `trace.py` | ns-2's trace and the scenario's samples -> the lab's metrics |
| `driver.py` | one run: write, run `ns`, read, record (the runner's interface of a lab run) |
"""

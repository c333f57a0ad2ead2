"""The sim driver: `meshemu run FILE --driver sim` carries out each planned
run with the model in virtual time (`meshemu-medium sim`, emulator/README.md
section 3) and records it beside the lab's and ns-2's runs.

| module | what |
|---|---|
| `support.py` | what the sim can run: the refusals, located in the file, before anything starts |
| `scenario.py` | a run's UDP flows -> the sim's scenario, and the sim's figures of a flow -> the lab's metrics |
| `driver.py` | one run: write, run `meshemu-medium sim`, read, record (the runner's interface of a lab run) |
"""

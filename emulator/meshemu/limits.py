"""How much meshemu accepts from a user file, in one place.

A file beyond a limit is refused with `FILE:LINE:COL: path: problem` before
the work it would cause: reading a device, expanding a YAML alias bomb,
planning millions of runs, placing a million nodes. Every limit is far above
what a study needs (the largest shipped file is 5 KB, the largest topology
169 nodes, the largest plan 1500 runs); topologies/README.md lists them.
"""

from __future__ import annotations

# --- reading files ---
# YAML files (topologies, experiments, sim files). Shipped ones are under
# 5 KB; a topology of 1000 nodes written out one by one about 100 KB.
MAX_FILE_BYTES = 256 << 10
# ns-2 movement traces: setdest's output for 100 nodes over 900 s at 20 m/s
# is about 1 MB; read at about 20 MB/s.
MAX_TRACE_BYTES = 16 << 20

# --- YAML structure ---
# Mappings and lists inside each other; shipped files go 6 deep.
MAX_DEPTH = 50
# Values, keys and aliases as written: the YAML parser (pure Python, for
# the position of every value) reads some 30 000 a second here, so this
# many take half a second. The largest shipped file has 400; a topology of
# 1000 nodes, each with its position and a radio setting, some 10 000.
MAX_YAML_NODES = 15_000
# Values in the document once aliases are expanded: nine aliases of the one
# before, seven times over, are 4.8 million values written in 2 KB.
MAX_VALUES = 50_000

# --- topologies ---
# Nodes of a topology: each is a network namespace of the lab, and the
# medium's reach computations grow with the square of the count.
MAX_NODES = 1000
# Draws of a random generator's placement (max_attempts), and the node pairs
# the medium examines over all those draws (n x n x attempts): 10 000 draws
# of 50 nodes, 2500 of 100, 25 of 1000.
MAX_PLACEMENT_ATTEMPTS = 10_000
MAX_PLACEMENT_PAIRS = 25_000_000

# --- plans ---
# Runs of one experiment or sim file: sweep points x seeds (strip.yaml's
# paper-sized scale is 1500); counted before the sweep is expanded.
MAX_RUNS = 100_000
MAX_SEEDS = 10_000

# --- values ---
# Times (durations, starts, stops, pauses, waypoint times): a day of model
# time is beyond any study (the longest is 900 s) and far inside the
# medium's 64-bit nanoseconds.
MAX_TIME_NS = 86_400 * 10**9
# Rates: above every PHY rate and every offered load a lab can carry.
MAX_RATE_BPS = 100 * 10**9
# Sizes (packets, windows, queue limits in bytes).
MAX_SIZE_BYTES = 1 << 30
# Distances and coordinates: 1000 km; radio ranges are hundreds of metres.
MAX_DISTANCE_M = 1e6
# Speeds: three times the speed of sound, beyond anything a mesh rides on.
MAX_SPEED_MPS = 1000.0
# Levels in dB, dBm and dBi, either sign: real ones lie within ±200.
MAX_LEVEL_DB = 300.0
# Radio frequencies: up to 100 GHz (802.11 ends at 71 GHz).
MAX_FREQUENCY_HZ = 100e9


def placement_attempts(n: int) -> int:
    """The most draws a random generator of `n` nodes may make."""
    return max(1, min(MAX_PLACEMENT_ATTEMPTS, MAX_PLACEMENT_PAIRS // (n * n)))

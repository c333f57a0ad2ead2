"""meshemu: emulator of IEEE 802.11 ad hoc multi-hop networks (control plane)."""

from .errors import ConfigError, LabError, MediumError, MeshemuError
from .lab import CommandFailed, Lab, Node, Process, Result
from .simfile import load_sim
from .topology import Topology, load_topology

__version__ = "0.1.0"

__all__ = ["CommandFailed", "ConfigError", "Lab", "LabError", "MediumError", "MeshemuError", "Node", "Process",
           "Result", "Topology", "load_sim", "load_topology"]

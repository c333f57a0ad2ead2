"""meshemu: emulator of IEEE 802.11 ad hoc multi-hop networks (control plane)."""

__version__ = "0.1.0"

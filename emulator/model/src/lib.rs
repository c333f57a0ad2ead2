//! The sans-IO 802.11 medium model (see emulator/README.md).

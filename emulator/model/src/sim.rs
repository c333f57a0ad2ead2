//! The virtual-time driver (emulator/README.md section 3).

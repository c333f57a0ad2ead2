//! Radio statistics page (see emulator/README.md, section 5).

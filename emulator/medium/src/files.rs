//! Files and directories a running lab makes for the control plane.

use std::fs;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use anyhow::Context;

/// A file or symlink removed when dropped.
pub struct RemoveOnDrop(pub PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Err(e) = fs::remove_file(&self.0) {
            if e.kind() != io::ErrorKind::NotFound {
                eprintln!("meshemu-medium: removing {}: {e}", self.0.display());
            }
        }
    }
}

pub fn create_dirs(dir: &Path, mode: u32) -> anyhow::Result<()> {
    fs::DirBuilder::new().recursive(true).mode(mode).create(dir).with_context(|| format!("creating {}", dir.display()))
}

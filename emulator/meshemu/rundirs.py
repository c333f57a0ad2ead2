"""/run/netns and /run/meshemu, the directories the labs fill, in memory.

A lab makes four files per node there (the node's namespace file, its
directory, its statistics page and its by-netns link), 4000 for a 1000-node
lab, and removes them at down. /run is a tmpfs on most hosts. Where it lies
on a disk filesystem instead (this project's own machines: ext4), every new
file costs time in the inode allocator in proportion to the files deleted
shortly before, and that was most of a large lab's bring-up
(emulator/README.md section 4). So the first lab to come up on such a host
mounts a tmpfs of its own on each of the two, and the last to go down
unmounts them again: the host is left as it was found.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from .errors import LabError
from .state import BY_NETNS, NETNS_DIR, RUN_ROOT, host_lock

MOUNT_SOURCE = "meshemu"  # how `mount` and /proc/self/mountinfo name our tmpfs
MEMORY_FILESYSTEMS = {"tmpfs", "ramfs"}


def make_run_dir(run_dir: Path) -> None:
    """Make a lab's directory below RUN_ROOT, with RUN_ROOT and NETNS_DIR in
    memory; FileExistsError if the lab's directory exists."""
    with host_lock():
        mounted: list[Path] = []
        try:
            for directory in (NETNS_DIR, RUN_ROOT):
                directory.mkdir(mode=0o755, parents=True, exist_ok=True)
                # Not over files that are there already: they would be hidden, not removed.
                if not in_memory(directory) and not any(directory.iterdir()):
                    _run(["mount", "-t", "tmpfs", "-o", "mode=0755,nosuid,nodev", MOUNT_SOURCE, str(directory)])
                    mounted.append(directory)
            run_dir.mkdir(mode=0o700)
        except BaseException:
            for directory in mounted:
                _unmount_ours(directory)
            raise


def release() -> None:
    """Remove RUN_ROOT once no lab is left in it (nothing but an empty
    by-netns directory), and unmount our tmpfs from each of the two once it
    is empty."""
    with host_lock():
        if RUN_ROOT.is_dir() and not any(entry != BY_NETNS or any(entry.iterdir()) for entry in RUN_ROOT.iterdir()):
            _unmount_ours(RUN_ROOT)
            for directory in (BY_NETNS, RUN_ROOT):
                try:
                    directory.rmdir()
                except OSError:
                    pass  # gone with our tmpfs, or someone else's mount point
        if NETNS_DIR.is_dir() and not any(NETNS_DIR.iterdir()):
            _unmount_ours(NETNS_DIR)


def in_memory(directory: Path) -> bool:
    return _mount_of(directory)[1] in MEMORY_FILESYSTEMS


def _unmount_ours(directory: Path) -> None:
    if _mount_of(directory) == (directory, "tmpfs", MOUNT_SOURCE):
        # Lazily: a program that still has a page open keeps it until it closes it.
        _run(["umount", "--lazy", str(directory)])


def _mount_of(path: Path) -> tuple[Path, str, str]:
    """The mount point, filesystem type and source of the mount `path` lies
    on (the last mounted of those with the longest mount point)."""
    found = (Path("/"), "", "")
    for mount in mounts():
        if path.is_relative_to(mount[0]) and len(mount[0].parts) >= len(found[0].parts):
            found = mount
    return found


def mounts() -> list[tuple[Path, str, str]]:
    """This process's mounts in the order they were mounted: mount point,
    filesystem type, source."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        # id parent major:minor root mount-point options [optional...] - type source super-options
        fields = line.split()
        separator = fields.index("-", 6)
        found.append((Path(_unescape(fields[4])), fields[separator + 1], _unescape(fields[separator + 2])))
    return found


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes."""
    for escaped, plain in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(escaped, plain)
    return field


def _run(argv: list[str]) -> None:
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise LabError(f"{' '.join(argv)} failed: {result.stderr.strip() or f'exit status {result.returncode}'}")

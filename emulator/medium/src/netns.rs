//! Named network namespaces and their TAP devices, created from the calling
//! thread (setns/unshare act per thread, so a worker thread can build one
//! namespace after another while the process stays where it is).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{openat, OFlag};
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sched::{unshare, CloneFlags};
use nix::sys::stat::Mode;

use crate::config::Arp;

/// Where `ip netns` looks for named namespaces.
pub const NETNS_RUN_DIR: &str = "/run/netns";
/// The interface every node's medium attachment is called.
pub const TAP_NAME: &str = "wlan0";

nix::ioctl_write_ptr_bad!(tun_set_iff, libc::TUNSETIFF, libc::ifreq);
nix::ioctl_write_int_bad!(tun_set_persist, libc::TUNSETPERSIST);

/// Makes `/run/netns` exist and a shared mount point, as `ip netns add` does,
/// so namespaces we bind there are seen from every mount namespace.
pub fn prepare_netns_dir() -> io::Result<()> {
    fs::create_dir_all(NETNS_RUN_DIR)?;
    let make_shared = || {
        mount(None::<&str>, NETNS_RUN_DIR, None::<&str>, MsFlags::MS_SHARED | MsFlags::MS_REC, None::<&str>)
    };
    match make_shared() {
        Ok(()) => Ok(()),
        // Not a mount point yet: bind it onto itself first.
        Err(Errno::EINVAL) => {
            mount(Some(NETNS_RUN_DIR), NETNS_RUN_DIR, Some("none"), MsFlags::MS_BIND | MsFlags::MS_REC, None::<&str>)?;
            make_shared()?;
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// A namespace bound at `/run/netns/NAME`; dropping it unmounts and removes
/// the name. The namespace itself dies when nothing else holds it.
#[derive(Debug)]
pub struct NetnsMount {
    path: PathBuf,
}

impl Drop for NetnsMount {
    fn drop(&mut self) {
        if let Err(e) = umount2(&self.path, MntFlags::MNT_DETACH) {
            eprintln!("meshemu-medium: unmounting {}: {e}", self.path.display());
        }
        if let Err(e) = fs::remove_file(&self.path) {
            eprintln!("meshemu-medium: removing {}: {e}", self.path.display());
        }
    }
}

/// Moves the calling thread into a new network namespace and binds it at
/// `/run/netns/NAME`. Fails if that name exists already.
pub fn create_named_netns(name: &str) -> io::Result<NetnsMount> {
    let path = Path::new(NETNS_RUN_DIR).join(name);
    OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o000)
        .open(&path)
        .map_err(|e| {
            if e.kind() == io::ErrorKind::AlreadyExists {
                io::Error::new(e.kind(), format!("{} exists already", path.display()))
            } else {
                e
            }
        })?;
    // From here on, dropping `bound` removes the file again (the unmount of a
    // file that is not mounted just fails quietly into stderr).
    let bound = NetnsMount { path };
    unshare(CloneFlags::CLONE_NEWNET)?;
    mount(Some("/proc/thread-self/ns/net"), &bound.path, None::<&str>, MsFlags::MS_BIND, None::<&str>)?;
    Ok(bound)
}

/// Inode of the calling thread's network namespace (what
/// `stat /proc/self/ns/net` shows a process running in it).
pub fn current_netns_inode() -> io::Result<u64> {
    Ok(fs::metadata("/proc/thread-self/ns/net")?.ino())
}

/// The `net` sysctls of the namespace the calling thread was in when it
/// opened them. Every namespace's `ipv4` and `ipv6` directories are
/// children of the one `/proc/sys/net` dentry, all in one hash chain: a
/// path through them costs time in proportion to the namespaces on the host
/// (0.1 ms with 1000, where the entry sits deep in the chain). So each is
/// looked up once per node, when it is opened, and the keys from there.
pub struct NetSysctls {
    ipv4: OwnedFd,
    /// None on a kernel without IPv6.
    ipv6: Option<OwnedFd>,
}

impl NetSysctls {
    pub fn open() -> io::Result<Self> {
        let net = File::open("/proc/sys/net")?;
        let directory = |name: &str| {
            openat(net.as_fd(), name, OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty())
                .map_err(|e| io::Error::new(io::Error::from(e).kind(), format!("/proc/sys/net/{name}: {e}")))
        };
        let ipv6 = match directory("ipv6") {
            Ok(fd) => Some(fd),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        Ok(NetSysctls { ipv4: directory("ipv4")?, ipv6 })
    }

    fn write_ipv4(&self, key: &str, value: &str) -> io::Result<()> {
        write_at(&self.ipv4, "ipv4", key, value)
    }

    fn write_ipv6(&self, key: &str, value: &str) -> io::Result<()> {
        match &self.ipv6 {
            Some(ipv6) => write_at(ipv6, "ipv6", key, value),
            None => Err(io::Error::new(io::ErrorKind::NotFound, "/proc/sys/net/ipv6: this kernel has no IPv6")),
        }
    }

    /// The sysctls of a multi-hop node, set before its interface exists so
    /// that `default` already applies to it: forwarding on, no ICMP
    /// redirects, no reverse-path filter, no IPv6 (nothing but our own
    /// traffic on the medium).
    pub fn set_node(&self) -> io::Result<()> {
        // A kernel without IPv6 has nothing to disable.
        if self.ipv6.is_some() {
            for scope in ["all", "default"] {
                self.write_ipv6(&format!("conf/{scope}/disable_ipv6"), "1")?;
            }
        }
        self.write_ipv4("ip_forward", "1")?;
        for scope in ["all", "default"] {
            self.set_interface_ipv4(scope)?;
        }
        Ok(())
    }

    /// The per-interface part of [`NetSysctls::set_node`].
    pub fn set_interface_ipv4(&self, interface: &str) -> io::Result<()> {
        for (name, value) in [("send_redirects", "0"), ("accept_redirects", "0"), ("rp_filter", "0")] {
            self.write_ipv4(&format!("conf/{interface}/{name}"), value)?;
        }
        Ok(())
    }

    /// The neighbour table of `interface` as `arp` asks. For `ResolveOnce`
    /// an entry stays reachable for a day, longer than any lab, and one
    /// that starts stale (learnt from a neighbour's own request) waits a day
    /// before its first probe.
    pub fn set_arp(&self, interface: &str, arp: Arp) -> io::Result<()> {
        match arp {
            Arp::Kernel => Ok(()),
            Arp::ResolveOnce => {
                self.write_ipv4(&format!("neigh/{interface}/base_reachable_time_ms"), "86400000")?;
                self.write_ipv4(&format!("neigh/{interface}/delay_first_probe_time"), "86400")
            }
        }
    }

    /// IPv6 on for one interface while `all` and `default` stay off: the
    /// kernel gives it a link-local address (from the MAC) when it goes up,
    /// usable at once (no duplicate address detection: the MACs are unique).
    pub fn enable_ipv6_link_local(&self, interface: &str) -> io::Result<()> {
        self.write_ipv6(&format!("conf/{interface}/accept_dad"), "0")?;
        self.write_ipv6(&format!("conf/{interface}/disable_ipv6"), "0")
    }
}

/// Writes `value` to the sysctl `key` below the directory `dir` (named
/// `/proc/sys/net/<name>` in errors).
fn write_at(dir: &OwnedFd, name: &str, key: &str, value: &str) -> io::Result<()> {
    let described = |e: io::Error| io::Error::new(e.kind(), format!("/proc/sys/net/{name}/{key}: {e}"));
    let fd = openat(dir.as_fd(), key, OFlag::O_WRONLY | OFlag::O_CLOEXEC, Mode::empty())
        .map_err(|e| described(e.into()))?;
    File::from(fd).write_all(value.as_bytes()).map_err(described)
}

/// Creates the persistent TAP `name` (no packet information header) in the
/// calling thread's network namespace and returns its non-blocking fd.
/// Persistent, so that closing the fd is cheap: the device goes away with its
/// namespace, in the kernel's batched namespace cleanup.
pub fn create_tap(name: &str) -> io::Result<OwnedFd> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open("/dev/net/tun")?;
    let fd = OwnedFd::from(file);
    let mut request = interface_request(name)?;
    request.ifr_ifru.ifru_flags = (libc::IFF_TAP | libc::IFF_NO_PI) as libc::c_short;
    // SAFETY: TUNSETIFF reads a valid, initialised ifreq on an open tun fd.
    unsafe { tun_set_iff(fd.as_raw_fd(), &request) }?;
    // SAFETY: TUNSETPERSIST takes an integer flag on an attached tun fd.
    unsafe { tun_set_persist(fd.as_raw_fd(), 1) }?;
    Ok(fd)
}

fn interface_request(name: &str) -> io::Result<libc::ifreq> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains(['/', '\0']) {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("bad interface name {name:?}")));
    }
    // SAFETY: ifreq is plain old data; all zeroes is a valid value.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in request.ifr_name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    Ok(request)
}

/// Index of an interface of the calling thread's namespace.
pub fn interface_index(name: &str) -> io::Result<u32> {
    Ok(nix::net::if_::if_nametoindex(name)?)
}

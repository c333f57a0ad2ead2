#!/usr/bin/env bash
# meshemu setup: installs what is missing (Debian packages, a Python venv with
# the package, the Rust workspace in release mode), then runs what was asked.
#
#   ./setup.sh          install only
#   ./setup.sh test     install, then run every test (Rust and Python)
#   ./setup.sh demo     install, then run the default experiment and show it
#
# Safe to re-run: every step checks before it acts.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
venv="$here/.venv"

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
die() { printf 'setup.sh: %s\n' "$*" >&2; exit 1; }

debian_packages=(
    iproute2        # ip netns / ip link: namespaces, the user's view of labs
    iptables        # NFQUEUE rules for the queueing and routing daemons
    iperf3          # TCP/UDP traffic in experiments
    iputils-ping    # ping inside nodes
    procps          # sysctl, ps
    tcpdump         # per-node captures
    tshark          # reads the air captures in tests
    babeld          # a third-party routing daemon run unmodified (routing: babeld)
    ns2             # ns-2.35, the papers' simulator: meshemu run --driver ns2
    python3-venv    # the project's virtualenv
    python3-dev
    build-essential
    pkg-config
    ca-certificates
    curl
    # The VM mode (meshemu vm): QEMU, a static busybox for virtme-ng's
    # initramfs, kmod (depmod for the cached kernel, modprobe in the guest),
    # iw (hwsim radios are configured with it inside the VM).
    qemu-system-x86
    busybox-static
    kmod
    iw
    # meshemu view's browser tests: Debian's chromium driven by selenium.
    chromium
    chromium-driver
)

# The VM mode boots Debian's stock kernel (linux-image-amd64) from a cache in
# the repository: the package is fetched with apt-get download and unpacked,
# never installed on the host. virtme-ng builds the initramfs and QEMU command.
vm_cache="$here/.cache/vm"
virtme_ng_version="1.42"

install_debian_packages() {
    local missing=()
    for p in "${debian_packages[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return
    [ "$(id -u)" -eq 0 ] || die "need root to install Debian packages: ${missing[*]}"
    say "installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

ensure_rust() {
    if ! command -v cargo >/dev/null 2>&1; then
        [ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
    fi
    if ! command -v cargo >/dev/null 2>&1; then
        say "installing Rust from Debian (cargo)"
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -qq --no-install-recommends cargo >/dev/null
    fi
    local v
    v=$(rustc --version | awk '{print $2}')
    case "$v" in
        1.[0-7][0-9].*) die "Rust $v is too old; meshemu needs Rust >= 1.80 (rustup or Debian backports)";;
    esac
}

build_rust() {
    say "building the Rust workspace (release)"
    cargo build --release --workspace --locked --quiet
}

ensure_venv() {
    if [ ! -x "$venv/bin/python" ]; then
        say "creating the Python virtualenv at .venv"
        python3 -m venv "$venv"
    fi
    local stamp="$venv/.meshemu-installed"
    if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
        say "installing the meshemu Python package and its dependencies"
        "$venv/bin/pip" install --quiet --upgrade pip
        "$venv/bin/pip" install --quiet -e ".[test,cluster]"
        touch "$stamp"
    fi
    # The Python side finds the Rust programs next to its interpreter.
    local bin
    for bin in target/release/*; do
        [ -f "$bin" ] && [ -x "$bin" ] || continue
        ln -sf "$here/$bin" "$venv/bin/$(basename "$bin")"
    done
}

# Unpacks the kernel package linux-image-amd64 depends on into
# .cache/vm/kernel/<version>/ (boot/vmlinuz-<version>, lib/modules/<version>
# with modules.dep) and points .cache/vm/kernel/current at it.
fetch_vm_kernel() {
    local package version dir debs
    package=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/ {print $2; exit}')
    [ -n "$package" ] || { apt-get update -qq; package=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-/ {print $2; exit}'); }
    [ -n "$package" ] || die "cannot find the kernel package of linux-image-amd64 (apt-cache depends linux-image-amd64)"
    version=${package#linux-image-}
    dir="$vm_cache/kernel/$version"
    if [ ! -f "$dir/boot/vmlinuz-$version" ] || [ ! -f "$dir/lib/modules/$version/modules.dep" ]; then
        say "fetching the VM kernel $package into .cache/vm"
        debs="$vm_cache/debs"
        mkdir -p "$debs" "$vm_cache/kernel"
        # apt's download user cannot write into root's directories: fetch as root.
        (cd "$debs" && apt-get download -q -o APT::Sandbox::User=root "$package" >/dev/null)
        rm -rf "$dir.partial"
        dpkg-deb -x "$debs/${package}_"*.deb "$dir.partial"
        depmod -b "$dir.partial" "$version"
        rm -rf "$dir"
        mv "$dir.partial" "$dir"
        rm -f "$debs/${package}_"*.deb
    fi
    ln -sfn "$version" "$vm_cache/kernel/current"
}

ensure_virtme_ng() {
    if ! "$venv/bin/pip" show virtme-ng 2>/dev/null | grep -q "^Version: $virtme_ng_version\$"; then
        say "installing virtme-ng $virtme_ng_version into the virtualenv"
        "$venv/bin/pip" install --quiet "virtme-ng==$virtme_ng_version"
    fi
}

# meshemu view's chart library: uPlot's package from the npm registry,
# checked against its published integrity and served from the package, so
# the page fetches nothing at run time.
uplot_version="1.6.32"
uplot_integrity="sha512-KIMVnG68zvu5XXUbC4LQEPnhwOxBuLyW1AHtpm6IKTXImkbLgkMy+jabjLgSLMasNuGGzQm/ep3tOkyTxpiQIw=="
view_vendor="$here/emulator/meshemu/view/static/vendor"

fetch_view_assets() {
    [ -f "$view_vendor/uplot-$uplot_version.stamp" ] && return
    say "fetching uPlot $uplot_version for meshemu view"
    local work digest
    work=$(mktemp -d)
    curl -fsS -o "$work/uplot.tgz" "https://registry.npmjs.org/uplot/-/uplot-$uplot_version.tgz" \
        || { rm -rf "$work"; die "could not fetch uplot-$uplot_version.tgz from registry.npmjs.org"; }
    digest="sha512-$(python3 -c 'import base64, hashlib, sys; print(base64.b64encode(hashlib.sha512(open(sys.argv[1], "rb").read()).digest()).decode())' "$work/uplot.tgz")"
    [ "$digest" = "$uplot_integrity" ] || { rm -rf "$work"; die "uplot-$uplot_version.tgz: integrity $digest, expected $uplot_integrity"; }
    tar -xzf "$work/uplot.tgz" -C "$work"
    mkdir -p "$view_vendor"
    cp "$work/package/dist/uPlot.iife.min.js" "$work/package/dist/uPlot.min.css" "$view_vendor/"
    cp "$work/package/LICENSE" "$view_vendor/uPlot.LICENSE"
    rm -rf "$work"
    touch "$view_vendor/uplot-$uplot_version.stamp"
}

install_all() {
    install_debian_packages
    ensure_rust
    build_rust
    ensure_venv
    fetch_view_assets
    ensure_virtme_ng
    fetch_vm_kernel
}

run_tests() {
    [ "$(id -u)" -eq 0 ] || die "the tests need root (network namespaces); run as root"
    say "Rust tests"
    cargo test --release --workspace --locked --quiet
    say "Python tests"
    "$venv/bin/python" -m pytest -q -ra --durations=15 tests
}

case "${1:-install}" in
    install) install_all ;;
    test) install_all; run_tests ;;
    demo) install_all; exec "$venv/bin/meshemu" demo ;;
    *) die "usage: ./setup.sh [install|test|demo]" ;;
esac

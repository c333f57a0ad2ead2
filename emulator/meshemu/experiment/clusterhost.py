"""The hosts of a cluster (`meshemu scheduler`, `meshemu worker ADDRESS`) and
what a worker does with one run; the head's side is cluster.py.

Every participant holds the cluster's secret, a private key and a
self-signed certificate in one file (`meshemu scheduler` creates it; copy it
to every host): Dask's TLS then authenticates both ends of every connection
against it, so only holders of the secret can submit runs, which workers
carry out as root.

A worker declares `slots` of the resource `lab` (one per two cores by
default) and runs one task per slot. Before a run starts, and at the head's
admission, the worker checks that it can carry it out exactly as the head
would: the same meshemu (package version and git commit), root for labs, the
programs of the runs (ns for ns-2), mac80211_hwsim for hwsim labs; it refuses
otherwise, naming what differs. A lab in progress is marked in
/run/meshemu-cluster/ with the worker's process id: a worker killed mid-run
leaves its lab behind, and the next worker started on that host removes it.
"""

from __future__ import annotations

import asyncio
import datetime
import io
import json
import os
import secrets
import signal
import tarfile
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import hwsim, procs
from ..errors import MeshemuError
from ..state import run_dir_of
from ..teardown import teardown
from .execute import Interrupted, Outcome, Tools
from .runs import LAB, Run
from .results import software_version

# The Dask resource of a lab slot: every run takes one.
SLOT = "lab"
PORT = 8786
# Dask's scheduler and workers always start an HTTP server (dashboard, metrics, health) that cannot
# authenticate its client: bound to loopback and given no routes, it answers nothing but 404.
HTTP_ADDRESS = "127.0.0.1:0"
NO_HTTP_ROUTES = {"distributed.scheduler.http.routes": [], "distributed.worker.http.routes": []}
DEFAULT_SECRET = Path.home() / ".config" / "meshemu" / "cluster.pem"
# How many times a run may lose its worker before it counts as failed.
WORKER_DEATHS = 2
# Labs under way on this host, one marker each naming the worker that runs it.
MARKERS = Path("/run/meshemu-cluster")
# Hex digits a worker adds to the head's prefix of a lab's name (16 characters at most).
LAB_SUFFIX = 3


class ClusterError(MeshemuError):
    pass


def require_dask() -> None:
    """A clear error where the optional dependency is missing."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise ClusterError("the cluster needs Dask distributed, an optional dependency: ./setup.sh installs it "
                           "(or pip install -e '.[cluster]')") from None


# --- the secret ------------------------------------------------------------------------------

def create_secret(path: Path) -> None:
    """A new cluster secret: an EC private key and a self-signed CA
    certificate, one PEM file, readable by its owner only."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "meshemu cluster")])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(days=1))
                   .not_valid_after(now + datetime.timedelta(days=3650))
                   .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                   .sign(key, hashes.SHA256()))
    text = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()) + certificate.public_bytes(serialization.Encoding.PEM)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(text)


def security(path: Path) -> Any:
    """Dask's TLS settings from the secret: every role presents the same
    certificate and accepts only peers that present it (mutual TLS)."""
    from distributed.security import Security

    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ClusterError(f"no cluster secret at {path}: `meshemu scheduler` creates it; copy it to every host "
                           "(or --secret FILE)") from None
    except OSError as exc:
        raise ClusterError(f"cannot read the cluster secret {path}: {exc}") from None
    key = _pem_block(text, "PRIVATE KEY", path)
    certificate = _pem_block(text, "CERTIFICATE", path)
    roles = {}
    for role in ("client", "scheduler", "worker"):
        roles[f"tls_{role}_cert"] = certificate
        roles[f"tls_{role}_key"] = key
    return Security(require_encryption=True, tls_ca_file=certificate, **roles)


def _pem_block(text: str, kind: str, path: Path) -> str:
    begin, end = f"-----BEGIN {kind}-----", f"-----END {kind}-----"
    start, stop = text.find(begin), text.find(end)
    if start < 0 or stop < start:
        raise ClusterError(f"{path} is not a cluster secret: no {kind} in it (`meshemu scheduler` writes one)")
    return text[start:stop + len(end)] + "\n"


def tls_address(address: str) -> str:
    """HOST[:PORT] or tls://HOST:PORT -> tls://HOST:PORT; other schemes are refused (nothing unencrypted)."""
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "tls", address
    if scheme != "tls":
        raise ClusterError(f"cluster address {address!r}: only tls:// (the cluster's traffic is authenticated)")
    host, colon, port = rest.rpartition(":")
    if not colon or not port.isdigit():
        host, port = rest, str(PORT)
    if not host:
        raise ClusterError(f"cluster address {address!r}: no host")
    return f"tls://{host}:{port}"


# --- the scheduler and the workers --------------------------------------------------------------

def serve_scheduler(listen: str, port: int, secret: Path, announce: Any) -> None:
    """The Dask scheduler, until Ctrl-C; no dashboard (NO_HTTP_ROUTES)."""
    import dask
    from distributed import Scheduler

    if not secret.exists():
        create_secret(secret)
        announce(f"created the cluster secret {secret}: copy it to every worker host (same path, or --secret)")
    tls = security(secret)

    async def serve() -> None:
        async with Scheduler(host=listen, port=port, protocol="tls", security=tls, dashboard=False,
                             dashboard_address=HTTP_ADDRESS) as scheduler:
            announce(f"scheduler at {scheduler.address}; workers join with: meshemu worker {scheduler.address}")
            await _until_finished_or_signalled(scheduler)

    # allowed-failures: how many lost workers a task survives before it errs (KilledWorker).
    with dask.config.set({"distributed.scheduler.allowed-failures": WORKER_DEATHS - 1, **NO_HTTP_ROUTES}):
        asyncio.run(serve())


def default_slots() -> int:
    """One lab per two cores: a lab's medium and its nodes' programs take about that."""
    return max(1, (os.cpu_count() or 1) // 2)


def serve_worker(address: str, slots: int, name: str, secret: Path, announce: Any) -> None:
    """Join the cluster at `address` with `slots` lab slots, until Ctrl-C or the scheduler ends."""
    import dask
    from distributed import Worker
    from distributed.utils import get_ip

    tls = security(secret)
    for line in clean_left_labs():
        announce(line)
    address = tls_address(address)
    host = get_ip(address.removeprefix("tls://").rpartition(":")[0])

    async def serve() -> None:
        async with Worker(address, nthreads=slots, resources={SLOT: slots}, name=name, host=host, protocol="tls",
                          security=tls, dashboard_address=HTTP_ADDRESS) as worker:
            announce(f"worker {name} at {worker.address}: {slots} lab slot{'s' if slots != 1 else ''}, "
                     f"scheduler {address}")
            if os.geteuid() != 0:
                announce("not root: this worker will be refused lab runs (ns2 and sim runs only)")
            if await _until_finished_or_signalled(worker):
                with _RUNNING_LOCK:
                    for stop in _RUNNING:
                        stop.set()  # each run tears its lab down; the scheduler sends it to another worker

    with dask.config.set(NO_HTTP_ROUTES):
        asyncio.run(serve())


async def _until_finished_or_signalled(server: Any) -> bool:
    """Wait until the server ends, or for SIGINT or SIGTERM: True then."""
    signalled = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, signalled.set)
    finished = asyncio.ensure_future(server.finished())
    signal_waiter = asyncio.ensure_future(signalled.wait())
    await asyncio.wait([finished, signal_waiter], return_when=asyncio.FIRST_COMPLETED)
    signal_waiter.cancel()
    return signalled.is_set()


# --- admission ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Needs:
    """What the runs of a plan need from a host."""

    software: dict[str, Any]  # the head's meshemu (results.software_version)
    programs: frozenset[str]
    labs: bool  # root and namespaces
    hwsim_backends: tuple[str, ...] = ()  # JSON of each distinct hwsim backend

    @classmethod
    def of(cls, runs: list[Run], software: dict[str, Any]) -> "Needs":
        backends = {json.dumps(run.topology.backend, sort_keys=True) for run in runs
                    if run.driver == LAB and run.topology.backend.get("kind") == "hwsim"}
        return cls(software, frozenset(Tools.needed(runs)), any(run.driver == LAB for run in runs),
                   tuple(sorted(backends)))


def refusal(needs: Needs) -> str | None:
    """Why this host cannot carry out runs with these needs, or None."""
    here = software_version()
    if here != needs.software:
        return (f"it runs meshemu {_version_text(here)} and the head {_version_text(needs.software)}: "
                "check out the head's commit there and run ./setup.sh")
    if needs.labs and os.geteuid() != 0:
        return "it is not root, and labs need network namespaces: start meshemu worker as root"
    try:
        Tools.locate(set(needs.programs))
        for backend in needs.hwsim_backends:
            hwsim.check_kernel(json.loads(backend))
    except MeshemuError as exc:
        return str(exc)
    return None


def _version_text(software: dict[str, Any]) -> str:
    return f"{software.get('meshemu')} (git {software.get('git') or 'none'})"


def worker_facts(needs: Needs, dask_worker: Any = None) -> dict[str, Any]:
    """Run on each worker by the head's admission (Client.run)."""
    return {"name": str(dask_worker.name), "refusal": refusal(needs),
            "slots": int(dask_worker.state.total_resources.get(SLOT, 0))}


# --- one run on a worker -------------------------------------------------------------------------

# The stop events of the runs under way in this worker (SIGTERM stops them all).
_RUNNING: set[threading.Event] = set()
_RUNNING_LOCK = threading.Lock()


@dataclass(frozen=True)
class RemoteRun:
    run: Run
    needs: Needs
    lab_prefix: str  # the head's part of the lab's name; the worker completes it (lab_name)
    plan_name: str
    topic: str  # the head's event topic: "started on host"


@dataclass
class RemoteResult:
    host: str  # the worker's name
    address: str  # the worker's address
    outcome: Outcome | None = None
    error: str | None = None
    refused: str | None = None
    artefacts: bytes = b""  # a tar.gz of the run's directory


def run_remote(request: RemoteRun) -> RemoteResult:
    """The Dask task of one run: checks the host, runs it through the
    runner's own driver (runner.execution_of) into a temporary directory and
    returns its outcome or error with the directory's contents. The lab
    stops (and is torn down) when the task is cancelled: Ctrl-C on the head,
    or the head gone."""
    from distributed import get_worker

    from .runner import driver_versions, execution_of

    worker = get_worker()
    key = worker.get_current_task()
    host = str(worker.name)
    why = refusal(request.needs)
    if why is not None:
        return RemoteResult(host, worker.address, refused=why)
    stop = threading.Event()
    finished = threading.Event()
    with _RUNNING_LOCK:
        _RUNNING.add(stop)

    def watch_cancellation() -> None:
        while not finished.wait(0.5):
            task = worker.state.tasks.get(key)
            if task is None or task.state == "cancelled":
                stop.set()
                return

    threading.Thread(target=watch_cancellation, name=f"watch-{key}", daemon=True).start()
    worker.log_event(request.topic, {"run_id": request.run.run_id, "label": request.run.label(), "host": host})
    try:
        with tempfile.TemporaryDirectory(prefix="meshemu-run-") as temporary, _LabMarker(request) as marker:
            directory = Path(temporary) / request.run.run_id
            tools = Tools.find([request.run])
            ns2_version, sim_version = driver_versions(tools)
            execution = execution_of(request.run, directory, tools, stop, lab_name=marker.lab_name,
                                     plan_name=request.plan_name, ns2_version=ns2_version, sim_version=sim_version)
            result = RemoteResult(host, worker.address)
            try:
                result.outcome = execution.execute()
                result.outcome.record["host"] = host
            except Interrupted:
                # Cancelled by the head (which no longer waits for a result) or the worker is stopping.
                result.error = f"the worker {host} stopped while the run was under way"
            except MeshemuError as exc:
                result.error = str(exc)
            result.artefacts = _archive(directory)
            return result
    finally:
        finished.set()
        with _RUNNING_LOCK:
            _RUNNING.discard(stop)


def _archive(directory: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        if directory.is_dir():
            for entry in sorted(directory.iterdir()):
                archive.add(entry, arcname=entry.name)
    return buffer.getvalue()


def unpack(artefacts: bytes, directory: Path) -> None:
    """A run's files from its worker into `directory` (the runner's partial directory)."""
    directory.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(artefacts), mode="r:gz") as archive:
        archive.extractall(directory, filter="data")


class _LabMarker:
    """The run's lab name, the head's prefix and a suffix no lab on this host
    has (a run the head sent again after its worker was lost may come to a
    worker on the same host while the first lab is still there), and for
    labs /run/meshemu-cluster/<lab>: this worker process runs that lab."""

    def __init__(self, request: RemoteRun):
        while True:
            self.lab_name = request.lab_prefix + secrets.token_hex(2)[:LAB_SUFFIX]
            if not run_dir_of(self.lab_name).exists() and not (MARKERS / self.lab_name).exists():
                break
        self.path = MARKERS / self.lab_name if request.run.driver == LAB else None

    def __enter__(self) -> "_LabMarker":
        if self.path is not None:
            me = procs.identify(os.getpid())
            assert me is not None
            MARKERS.mkdir(mode=0o700, exist_ok=True)
            self.path.write_text(json.dumps({"pid": me.pid, "start_time": me.start_time}))
        return self

    def __exit__(self, *exc: object) -> None:
        if self.path is not None:
            self.path.unlink(missing_ok=True)


def clean_left_labs() -> list[str]:
    """Tear down the labs of workers of this host that died mid-run."""
    report: list[str] = []
    if not MARKERS.is_dir():
        return report
    for marker in sorted(MARKERS.iterdir()):
        try:
            owner = json.loads(marker.read_text())
            alive = procs.is_alive(procs.ProcessId(int(owner["pid"]), int(owner["start_time"])))
        except (OSError, ValueError, KeyError, TypeError):
            alive = False
        if alive:
            continue
        removed = teardown(run_dir_of(marker.name))
        if removed:
            report.append(f"removed lab {marker.name}, left by a worker that stopped mid-run ({len(removed)} things)")
        marker.unlink(missing_ok=True)
    return report

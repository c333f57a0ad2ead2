"""`meshemu scheduler` and `meshemu worker`: a cluster of hosts that carries
out `meshemu run --cluster`."""

from __future__ import annotations

import argparse
import socket

from rich.markup import escape

from ..experiment import clusterhost
from .common import AddCommand, err, positive_int, secret_option


def register(command: AddCommand) -> None:
    sub = command("scheduler", _scheduler, "start the scheduler of a cluster of hosts (Dask, mutual TLS): workers "
                                            "join it, meshemu run --cluster sends it runs")
    sub.add_argument("--listen", default="127.0.0.1", metavar="HOST",
                     help="address to listen on (default: loopback; an address of this host for workers elsewhere)")
    sub.add_argument("--port", type=positive_int, default=clusterhost.PORT)
    secret_option(sub)

    sub = command("worker", _worker, "join a cluster and carry out its runs: meshemu worker tls://HEAD:8786")
    sub.add_argument("address", metavar="ADDRESS", help="the scheduler's address, as `meshemu scheduler` prints it")
    sub.add_argument("--slots", type=positive_int, default=clusterhost.default_slots(),
                     help="labs at once (default: one per two cores, %(default)s here)")
    sub.add_argument("--name", default=socket.gethostname(),
                     help="the worker's name, recorded as the host of its runs (default: the host name)")
    secret_option(sub)


def _scheduler(args: argparse.Namespace) -> int:
    clusterhost.require_dask()
    clusterhost.serve_scheduler(args.listen, args.port, args.secret, _announce)
    return 0


def _worker(args: argparse.Namespace) -> int:
    clusterhost.require_dask()
    clusterhost.serve_worker(args.address, args.slots, args.name, args.secret, _announce)
    return 0


def _announce(line: str) -> None:
    err.print(escape(line))

"""What the command groups share: the consoles, argument types, the cluster's secret option."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Callable

from rich.console import Console

from ..experiment import clusterhost

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)

Handler = Callable[[argparse.Namespace], int]
# command(name, handler, help) -> the command's parser, to add its arguments to.
AddCommand = Callable[[str, Handler, str], argparse.ArgumentParser]


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def secret_option(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--secret", type=Path, default=clusterhost.DEFAULT_SECRET, metavar="FILE",
                     help="the cluster's secret (meshemu scheduler creates it; default %(default)s)")

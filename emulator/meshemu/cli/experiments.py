"""`meshemu run`, `report` and `demo`: experiment files carried out by a driver
(labs, ns-2, the sim), alone or on a cluster, and their results."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from rich.markup import escape

from .. import hwsim, vm
from ..errors import LabError, MeshemuError
from ..experiment import clusterhost
from ..experiment import plan as experiment_plan
from ..experiment.runs import DRIVERS, LAB
from .common import AddCommand, err, out, positive_int, secret_option
from .vm import run_in_vm


def register(command: AddCommand) -> None:
    sub = command("run", _run, "run an experiment file in labs (or in ns-2, or the model in virtual time): every "
                               "sweep point and seed, one record per run")
    sub.add_argument("file", metavar="EXPERIMENT")
    _run_options(sub)

    sub = command("report", _report, "tables with 90%% confidence intervals, paired t-tests and plots of a "
                                      "results directory")
    sub.add_argument("dir", metavar="RESULTS_DIR")
    sub.add_argument("--x", metavar="PARAM", help="x axis of the plots: a swept parameter or hops "
                                                  "(default: the first swept parameter)")
    sub.add_argument("--group", metavar="PARAM", help="one series per value of this parameter")
    sub.add_argument("--compare", metavar="PARAM", help="paired t-tests between the values of this parameter "
                                                        "(default: --group)")
    sub.add_argument("--metric", action="append", metavar="NAME",
                     help="metrics to report, e.g. goodput_bps or medium.mac_drop_fraction (repeatable; "
                          "default: goodput of every flow)")
    sub.add_argument("--trace", metavar="RUN_ID", help="also draw the time series of this run (cwnd, RTT, "
                                                       "sequence/ACK events)")
    sub.add_argument("--spread", action="store_true", help="the table gives min / median / max over the seeds "
                                                           "instead of mean ± 90%% CI")

    sub = command("demo", _demo, "the demo: chain7 with TCP and UDP flows to 1, 2, 4 and 7 hops, "
                                  "and a table per hop count")
    _run_options(sub)


def _run_options(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--driver", choices=DRIVERS, default=LAB,
                     help="lab (default): real-time labs of Linux namespaces; ns2: each run translated into an "
                          "ns-2.35 scenario and simulated; sim: each run by our model in virtual time "
                          "(meshemu-medium sim); what ns-2 or the sim cannot do is refused")
    sub.add_argument("--jobs", type=positive_int, default=None,
                     help="runs at once (labs: default 1, they run in real time and more than half the cores "
                          "makes them late; ns2 and sim: default the number of cores)")
    sub.add_argument("--resume", action="store_true", help="skip the runs already recorded in the results")
    sub.add_argument("--only", action="append", default=[], metavar="PARAM=VALUE",
                     help="only the runs with this swept value (or seed=N); repeatable, all must match")
    sub.add_argument("--set", action="append", default=[], dest="overrides", metavar="PATH=VALUE",
                     help="override a value of the file (dotted path, YAML value), e.g. --set duration=20s")
    sub.add_argument("--scale", metavar="NAME",
                     help="apply the file's scales.NAME (e.g. full: the paper's whole design) before any --set")
    sub.add_argument("--out", metavar="DIR", help="results directory (default: results/<experiment name>)")
    sub.add_argument("--cluster", metavar="ADDRESS",
                     help="carry out the runs on the workers of this cluster (meshemu scheduler prints its address); "
                          "--jobs then caps the runs at once (default: every lab slot)")
    secret_option(sub)
    sub.add_argument("--dry-run", action="store_true", help="list the runs and their ids; run nothing")


def _run(args: argparse.Namespace) -> int:
    plan = experiment_plan.load_experiment(args.file, overrides=args.overrides, scale=args.scale, driver=args.driver)
    # On a cluster the workers check what the runs need (a topology asking for the VM is refused there).
    asks_vm = any(run.topology.backend.get("vm") for run in plan.runs)
    if asks_vm and not args.dry_run and not args.cluster and not hwsim.in_vm():
        out.print("The experiment's topology asks for the VM (backend.vm: true): running it there.")
        return run_in_vm([sys.executable, "-m", "meshemu", *args.command_line], vm.DEFAULT_MEMORY, None, [])
    return _run_plan(plan, args)


def _run_plan(plan: experiment_plan.Plan, args: argparse.Namespace) -> int:
    from ..experiment.results import ResultsDir
    from ..experiment.runner import Runner, cores, select_runs

    runs = select_runs(plan, args.only)
    results = ResultsDir(Path(args.out) if args.out else Path("results") / plan.name)
    if args.dry_run:
        for run in runs:
            print(f"{run.run_id}  {run.label()}")
        return 0
    lab = args.driver == LAB
    if args.cluster:
        clusterhost.require_dask()
    elif lab and os.geteuid() != 0:
        raise LabError("experiments run in labs, which need root (network namespaces): run as root "
                       "(or --driver ns2 or sim)")
    if not args.resume and results.records():
        raise MeshemuError(f"{results.path} holds results already: --resume to add the missing runs (runs of "
                           "another driver have their own ids), or --out DIR for a new directory")
    if args.jobs is None and not args.cluster:
        args.jobs = 1 if lab else cores()
    if lab and not args.cluster and args.jobs > max(1, cores() // 2):
        err.print(f"[yellow]warning: --jobs {args.jobs} on {cores()} cores: labs run in real time and may fall "
                  "behind (runs are flagged behind_real_time)[/yellow]")
    err.print(f"{escape(plan.description or plan.name)}: {len(runs)} runs, results in {results.path}")
    if args.cluster:
        from ..experiment.cluster import Cluster, ClusterRunner

        with Cluster(args.cluster, args.secret, err) as cluster:
            summary = ClusterRunner(plan, results, args.jobs, err, cluster).run(runs, args.resume)
    else:
        summary = Runner(plan, results, args.jobs, err).run(runs, args.resume)
    not_recorded = summary.pending - len(summary.done) - len(summary.failed)
    parts = [f"{len(summary.done)} runs recorded"]
    if summary.skipped_recorded:
        parts.append(f"{summary.skipped_recorded} recorded before (skipped)")
    if summary.failed:
        parts.append(f"{len(summary.failed)} failed (see {results.path / 'failed.jsonl'})")
    if summary.behind_real_time:
        parts.append(f"{len(summary.behind_real_time)} behind real time")
    if not_recorded:
        parts.append(f"{not_recorded} not run")
    err.print(", ".join(parts) + f"; report with: meshemu report {results.path}")
    if summary.interrupted:
        err.print("interrupted: nothing is left running; meshemu run --resume carries on")
        return 130
    return 1 if summary.failed else 0


def _report(args: argparse.Namespace) -> int:
    from ..experiment import report

    report.report(Path(args.dir), console=out, x=args.x, group=args.group, compare=args.compare,
                  metrics=args.metric, trace=args.trace, spread=args.spread)
    return 0


def _demo(args: argparse.Namespace) -> int:
    from ..experiment import demo

    plan = experiment_plan.load_experiment(demo.demo_file(), overrides=args.overrides, scale=args.scale,
                                           driver=args.driver)
    if args.out is None:  # every demo anew, unless asked to resume one
        args.out = str(Path("results") / f"demo-{time.strftime('%Y%m%d-%H%M%S')}")
    status = _run_plan(plan, args)
    if status == 0 and not args.dry_run:
        out.print(demo.table(Path(args.out), plan))
    return status

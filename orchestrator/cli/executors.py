"""`--executor local|ray` and `--ray-address ADDR`: where a job's agents run (run, run-batch)."""

from __future__ import annotations

import argparse

from ..jobs import Executor, Job


def add_executor_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--executor",
        choices=["local", "ray"],
        help="where the agents run: here (local) or on a Ray cluster (needs the [ray] extra); "
        "default: the spec's `executor`, else local",
    )
    parser.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="the Ray cluster to use: auto (the one running here) or ray://HOST:10001; "
        "default: a Ray of its own on this machine",
    )


def with_executor(job: Job, args: argparse.Namespace) -> Job:
    """`job` with the executor the command line asks for (`--ray-address` implies ray)."""
    kind = args.executor or ("ray" if args.ray_address else None)
    if kind is None:
        return job
    spec = job.executor
    address = args.ray_address or (spec.address if spec.type == "ray" else None)
    chosen = Executor.model_validate(
        {"type": kind, "address": address if kind == "ray" else None, "workers": spec.workers}
    )
    return job.model_copy(update={"executor": chosen})

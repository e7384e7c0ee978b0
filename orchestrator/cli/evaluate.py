"""`orchestrator eval EVAL.yaml`: a job's cases in each variant, scored, side by side.

Prints a table per variant (pass rate and its 95% interval, mean score, tokens per run, the
share of input served from cache, cost, time per run), the cases that flipped between
variants, and the runs that diverged from their recording or could not run. One JSON line per
run goes to the results file (default `.orchestrator/evals/NAME/results.jsonl`); running the
same command again skips the runs already done (`--fresh` starts over). Exit codes: 0, 1 when
a variant's pass rate is under `--min-pass` (or the file's `min_pass`) or a replayed run
diverged, 2 when the eval file or a flag is invalid (nothing ran), 130 when interrupted
(Ctrl-C: the runs that ended keep their lines).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..eval import EvalOptions, load_eval, render_table, run_eval_sync
from ..eval.page import write_page
from ..trace.summary import plural
from .jobs import EXIT_INTERRUPTED, EXIT_OK, EXIT_SPEC_ERROR, config_error

EXIT_BELOW_MIN_PASS = 1
DEFAULT_EVAL_DIR = Path(".orchestrator") / "evals"


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    command = commands.add_parser(
        "eval",
        help="run a job's cases in variants side by side, and score them",
        description="Run the eval file's cases in each of its variants and score every run.",
    )
    command.add_argument("eval_file", metavar="EVAL.yaml", help="the eval file")
    command.add_argument("--repeat", type=int, metavar="N", help="runs of each case per variant")
    command.add_argument("--concurrency", type=int, metavar="N", help="runs at once")
    command.add_argument(
        "--variant",
        dest="variants",
        action="append",
        default=[],
        metavar="NAME",
        help="run only this variant (repeatable)",
    )
    command.add_argument(
        "--case",
        dest="cases",
        action="append",
        default=[],
        metavar="ID",
        help="run only this case (repeatable)",
    )
    command.add_argument(
        "--min-pass",
        type=float,
        metavar="RATE",
        help="exit 1 when a variant's pass rate is under RATE (0 to 1)",
    )
    command.add_argument(
        "-m", "--model", metavar="MODEL", help="every variant's model: provider:model or an alias"
    )
    command.add_argument("--max-tokens", type=int, metavar="N", help="one budget for the eval")
    command.add_argument(
        "--max-cost-usd", type=float, metavar="USD", help="one budget for the eval, in dollars"
    )
    command.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="where traces and workspaces go (default: .orchestrator/evals/NAME)",
    )
    command.add_argument("--results", type=Path, metavar="FILE", help="the results file (JSONL)")
    command.add_argument(
        "--fresh", action="store_true", help="start over: forget the runs done earlier"
    )
    replay = command.add_mutually_exclusive_group()
    replay.add_argument(
        "--record", type=Path, metavar="DIR", help="keep every run's model calls in DIR"
    )
    replay.add_argument(
        "--replay",
        type=Path,
        metavar="DIR",
        help="answer every model call from the recordings in DIR (offline, no key)",
    )
    command.add_argument("--html", type=Path, metavar="FILE", help="also write an HTML page")
    command.add_argument("--json", action="store_true", help="print the summary as JSON")
    command.add_argument("-q", "--quiet", action="store_true", help="no line per run on stderr")
    command.set_defaults(handler=eval_command)


def eval_command(args: argparse.Namespace) -> int:
    try:
        loaded = load_eval(args.eval_file)
        min_pass = args.min_pass if args.min_pass is not None else loaded.spec.min_pass
        if min_pass is not None and not 0 <= min_pass <= 1:
            raise ConfigError(f"--min-pass must be between 0 and 1, got {min_pass}")
        if args.replay is not None and not args.replay.is_dir():
            raise ConfigError(f"--replay {args.replay}: no such folder")
        out = args.out or DEFAULT_EVAL_DIR / _safe(loaded.spec.name)
        options = EvalOptions(
            out=out,
            results=args.results,
            repeat=args.repeat,
            concurrency=args.concurrency,
            variants=args.variants,
            cases=args.cases,
            model=args.model,
            max_tokens=args.max_tokens,
            max_cost_usd=args.max_cost_usd,
            record=args.record,
            replay=args.replay,
            fresh=args.fresh,
            on_line=None if args.quiet else _show,
        )
        result = run_eval_sync(loaded, options)
    except ConfigError as exc:
        print(f"error: {config_error(exc)}", file=sys.stderr)
        return EXIT_SPEC_ERROR
    except KeyboardInterrupt:
        print(
            f"eval interrupted: the runs that ended are in {options.results_file}; the same "
            "command goes on with the others",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    summary = result.summary
    if args.json:
        print(json.dumps(summary.as_dict(), indent=2))
    else:
        print(render_table(summary))
    ran, skipped = len(result.progress.lines), result.progress.skipped
    changed = result.progress.changed
    if changed:
        whys = list(dict.fromkeys(why for changes in changed.values() for why in changes))
        print(
            f"{plural(len(changed), 'run')} done earlier {'was' if len(changed) == 1 else 'were'} "
            f"made by a changed eval ({', '.join(whys)}): run again, the earlier lines set "
            "aside (kept in the results file, not counted)",
            file=sys.stderr,
        )
    note = f"; {skipped} done earlier, skipped (--fresh runs them again)" if skipped else ""
    print(
        f"eval {summary.name}: {plural(ran, 'run')}{note}; results: {result.results}",
        file=sys.stderr,
    )
    if args.html is not None:
        print(f"page: {write_page(summary, result.lines, args.html)}", file=sys.stderr)
    failed = False
    if min_pass is not None:
        for row in summary.below(min_pass):
            print(
                f"variant {row.name}: pass rate {row.pass_rate:.0%} is under --min-pass "
                f"{min_pass:.0%}",
                file=sys.stderr,
            )
            failed = True
    if summary.divergences:
        print(
            f"{plural(len(summary.divergences), 'run')} diverged from the recording",
            file=sys.stderr,
        )
        failed = True
    return EXIT_BELOW_MIN_PASS if failed else EXIT_OK


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in name)


def _show(line: dict[str, Any]) -> None:
    verdict = "pass" if line.get("passed") else "FAIL"
    detail = line.get("divergence") or line.get("error") or ""
    if not detail and not line.get("passed"):
        failed = [s["name"] for s in line.get("scores") or [] if not s.get("passed")]
        detail = "failed: " + ", ".join(failed) if failed else ""
    tokens = (line.get("usage") or {}).get("total_tokens", 0)
    text = f"{line['key']}: {verdict} ({line.get('status')}, {tokens:,} tokens)"
    print(f"{text} {detail}".rstrip(), file=sys.stderr)

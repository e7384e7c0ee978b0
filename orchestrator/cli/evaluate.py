"""`orchestrator eval EVAL.yaml`: a job's cases in each variant, scored, side by side.

Prints a table per variant (pass rate and its 95% interval, mean score, tokens per run, the
share of input served from cache, cost, time per run), the cases that flipped between
variants, and the runs that diverged from their recording or could not run. One JSON line per
run goes to the results file (default `.orchestrator/evals/NAME/results.jsonl`); running the
same command again skips the runs already done (`--fresh` starts over). Exit codes: 0, 1 when
a variant's pass rate is under `--min-pass` (or the file's `min_pass`) or a replayed run
diverged, 2 when the eval file, its job or a flag is invalid (nothing ran: the job is checked
as `orchestrator run` checks it), 3 when a run ended in error (it could not start, or its model
or one of its steps errored), `--min-pass` or not, 130 when interrupted (Ctrl-C: the runs that
ended keep their lines).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..eval import EvalOptions, LoadedEval, load_eval, render_table, run_eval_sync
from ..eval.page import write_page
from ..eval.python_checks import CheckSandbox
from ..eval.skill_folder import (
    DEFAULT_TRIGGER_STEPS,
    EVALS_FILE,
    TRIGGER_FILES,
    Catalog,
    SkillEvalOptions,
    find_eval_files,
    ignored_fields,
    skill_folders,
    trigger_eval,
    with_without_eval,
)
from ..messages import plural
from ..security.inventory import reads
from .jobs import EXIT_INTERRUPTED, EXIT_OK, EXIT_SPEC_ERROR, show_error

EXIT_BELOW_MIN_PASS = 1
EXIT_RUN_ERROR = 3
DEFAULT_EVAL_DIR = Path(".orchestrator") / "evals"


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    command = commands.add_parser(
        "eval",
        help="run a job's cases in variants side by side, and score them",
        description="Run the eval file's cases in each of its variants and score every run.",
    )
    command.add_argument(
        "eval_file",
        metavar="EVAL.yaml|SKILL_FOLDER",
        help="an eval file, or a skill folder (or a folder of them) with its own eval files",
    )
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
        "-m",
        "--model",
        action="append",
        default=[],
        metavar="MODEL",
        help="every variant's model: provider:model or an alias (a skill folder: repeat it "
        "to compare models)",
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
    command.add_argument(
        "--volatile-tool",
        dest="volatile_tools",
        action="append",
        default=[],
        metavar="TOOL",
        help="with --replay: this tool (skill__tool; * matches any text) runs again and its "
        "new result is taken, not compared with the recording (repeatable)",
    )
    command.add_argument(
        "--unconfined-checks",
        action="store_true",
        help="where no sandbox can run, run the eval's python: checks as you, unconfined "
        "(else such an eval is refused)",
    )
    command.add_argument("--html", type=Path, metavar="FILE", help="also write an HTML page")
    command.add_argument("--json", action="store_true", help="print the summary as JSON")
    command.add_argument("-q", "--quiet", action="store_true", help="no line per run on stderr")
    _skill_folder_options(command.add_argument_group("a skill folder's own evals"))
    command.set_defaults(handler=eval_command)


def _skill_folder_options(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--triggers-file",
        type=Path,
        metavar="FILE",
        help="the trigger queries (JSON), if not "
        "evals/trigger_eval.json or evals/eval_queries.json",
    )
    group.add_argument(
        "--evals-file", type=Path, metavar="FILE", help="the cases (JSON), if not evals/evals.json"
    )
    group.add_argument(
        "--only", choices=["trigger", "evals"], help="run only the trigger queries, or the cases"
    )
    group.add_argument(
        "--catalog",
        type=Path,
        action="append",
        default=[],
        metavar="DIR",
        help="the skill folders the skill is among (repeatable; default: the working folder's "
        "skills/, .claude/skills/, .agents/skills/), with the built-in skills",
    )
    group.add_argument("--alone", action="store_true", help="a variant with the skill alone")
    group.add_argument(
        "--distractors",
        type=int,
        action="append",
        default=[],
        metavar="N",
        help="a variant with N other skills of the catalog, drawn at random (repeatable)",
    )
    group.add_argument(
        "--disclosure",
        action="append",
        default=[],
        choices=["progressive", "eager", "auto"],
        help="a variant in this disclosure mode (repeatable)",
    )
    group.add_argument(
        "--description",
        action="append",
        default=[],
        metavar="TEXT|@FILE",
        help="a variant with this description instead of the skill's own (repeatable)",
    )
    group.add_argument("--judge", metavar="MODEL", help="the model that checks expectations")
    group.add_argument(
        "--trigger-steps",
        type=int,
        default=DEFAULT_TRIGGER_STEPS,
        metavar="N",
        help=f"a trigger run's step cap (default {DEFAULT_TRIGGER_STEPS})",
    )
    group.add_argument(
        "--min-precision", type=float, metavar="RATE", help="exit 1 under this trigger precision"
    )
    group.add_argument(
        "--min-recall", type=float, metavar="RATE", help="exit 1 under this trigger recall"
    )


def eval_command(args: argparse.Namespace) -> int:
    target = Path(args.eval_file)
    try:
        if target.is_dir():
            return _skill_folders_command(target, args)
        if len(args.model) > 1:
            raise ConfigError("-m once for an eval file: compare models with its variants")
        loaded = load_eval(target)
        return _run(loaded, args, args.out or DEFAULT_EVAL_DIR / _safe(loaded.spec.name))
    except ConfigError as exc:
        show_error(exc)
        return EXIT_SPEC_ERROR
    except KeyboardInterrupt:
        print(
            "eval interrupted: the runs that ended are in the results file; the same "
            "command goes on with the others",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED


def _skill_folders_command(path: Path, args: argparse.Namespace) -> int:
    """Each skill folder's own eval files, as evals: its trigger queries, then its cases
    with and without it."""
    folders = skill_folders(path)
    if not folders:
        raise ConfigError(f"{path}: no skill folder (a folder with a SKILL.md) there")
    if args.results is not None:
        raise ConfigError(
            "--results names one file: a skill folder's evals keep theirs under --out"
        )
    made = []
    for folder in folders:
        files = find_eval_files(folder, evals=args.evals_file, triggers=args.triggers_file)
        kinds = [k for k in ("trigger", "evals") if args.only in (None, k)]
        found = {"trigger": files.triggers, "evals": files.evals}
        if not any(found[k] for k in kinds):
            print(
                f"skill {files.skill}: no eval files ({EVALS_FILE}, {TRIGGER_FILES[0]} or "
                f"{TRIGGER_FILES[1]}): nothing to run",
                file=sys.stderr,
            )
            continue
        root = (args.out or DEFAULT_EVAL_DIR) / _safe(files.skill)
        options = SkillEvalOptions(
            out=root,
            models=args.model,
            disclosures=args.disclosure,
            catalog=args.catalog or None,
            catalogs=_catalogs(args),
            descriptions=[_description(text) for text in args.description],
            judge=args.judge,
            steps=args.trigger_steps,
        )
        for path_of in ignored(found[k] for k in kinds):
            print(f"note: {path_of}", file=sys.stderr)
        if found["trigger"] and "trigger" in kinds:
            made.append(trigger_eval(files, options))
        if found["evals"] and "evals" in kinds:
            made.append(with_without_eval(files, options))
        for note in options.notes:
            print(f"note: {files.skill}: {note}", file=sys.stderr)
    if not made:
        raise ConfigError(f"{path}: no eval files in its skill folders")
    failed = EXIT_OK
    for index, one in enumerate(made):
        if index:
            print()
        where = _safe(one.files.skill) + "/" + one.kind
        out = (args.out or DEFAULT_EVAL_DIR) / where
        code = _run(one.loaded, args, out, sub=where)
        failed = max(failed, code)
    return failed


def _catalogs(args: argparse.Namespace) -> list[Catalog]:
    """The catalog sizes the flags ask for (none: the whole catalog)."""
    found: list[Catalog] = ["alone"] if args.alone else []
    for count in args.distractors:
        if count < 1:
            raise ConfigError(f"--distractors {count}: give at least 1 (or --alone)")
        found.append(count)
    return found


def ignored(paths: Iterable[Path | None]) -> list[str]:
    """What eval files hold that is not read here, to say so."""
    found = []
    for path in paths:
        if path is not None and (fields := ignored_fields(path)):
            found.append(f"{path}: not read here: {', '.join(fields)}")
    return found


@reads("eval")
def _description(text: str) -> str:
    """`--description TEXT`, or `@FILE` for the text of a file."""
    if not text.startswith("@"):
        return text
    try:
        return Path(text[1:]).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--description {text}: cannot read it: {exc}") from None


def _recordings(args: argparse.Namespace, sub: str | None) -> tuple[Path | None, Path | None]:
    """The folders this eval records into and replays from (a skill folder's evals: each
    its own sub-folder)."""
    if args.replay is not None and not args.replay.is_dir():
        raise ConfigError(f"--replay {args.replay}: no such folder")
    record = args.record / sub if args.record is not None and sub else args.record
    replay = args.replay / sub if args.replay is not None and sub else args.replay
    if replay is not None and not replay.is_dir():
        raise ConfigError(f"--replay: no recordings of this eval at {replay}")
    if args.volatile_tools and replay is None:
        print("note: --volatile-tool counts only with --replay: ignored", file=sys.stderr)
    return record, replay


def _run(loaded: LoadedEval, args: argparse.Namespace, out: Path, sub: str | None = None) -> int:
    """Run one eval as the flags say; print its table and what it did; its exit code."""
    min_pass = args.min_pass if args.min_pass is not None else loaded.spec.min_pass
    for flag, value in (
        ("--min-pass", min_pass),
        ("--min-precision", args.min_precision),
        ("--min-recall", args.min_recall),
    ):
        if value is not None and not 0 <= value <= 1:
            raise ConfigError(f"{flag} must be between 0 and 1, got {value}")
    record, replay = _recordings(args, sub)
    if loaded.python_checks:  # said before any of their code runs
        checks = CheckSandbox(loaded.python_checks.values(), unconfined=args.unconfined_checks)
        print(f"{'warning' if checks.unconfined else 'note'}: {checks.describe()}", file=sys.stderr)
    options = EvalOptions(
        out=out,
        results=args.results if sub is None else None,
        repeat=args.repeat,
        concurrency=args.concurrency,
        variants=args.variants,
        cases=args.cases,
        model=args.model[0] if args.model and sub is None else None,
        max_tokens=args.max_tokens,
        max_cost_usd=args.max_cost_usd,
        record=record,
        replay=replay,
        volatile_tools=args.volatile_tools,
        fresh=args.fresh,
        on_line=None if args.quiet else _show,
        unconfined_checks=args.unconfined_checks,
    )
    result = run_eval_sync(loaded, options)
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
    if result.benchmark is not None:
        print(f"benchmark: {result.benchmark}", file=sys.stderr)
    if args.html is not None:
        page = (
            args.html if sub is None else args.html.with_name(f"{args.html.stem}-{_safe(sub)}.html")
        )
        print(f"page: {write_page(summary, result.lines, page)}", file=sys.stderr)
    failed = False
    if min_pass is not None:
        for row in summary.below(min_pass):
            shown = row.trigger.accuracy if row.trigger else row.pass_rate
            what = "accuracy" if row.trigger else "pass rate"
            print(
                f"variant {row.name}: {what} {shown:.0%} is under --min-pass {min_pass:.0%}",
                file=sys.stderr,
            )
            failed = True
    for figure, least in (("precision", args.min_precision), ("recall", args.min_recall)):
        if least is None:
            continue
        for row in summary.below_trigger(figure, least):
            flag = "--min-precision" if figure == "precision" else "--min-recall"
            print(
                f"variant {row.name}: {figure} {getattr(row.trigger, figure):.0%} is under "
                f"{flag} {least:.0%}",
                file=sys.stderr,
            )
            failed = True
    if summary.divergences:
        print(
            f"{plural(len(summary.divergences), 'run')} diverged from the recording",
            file=sys.stderr,
        )
        failed = True
    if summary.errors:
        print(f"{plural(len(summary.errors), 'run')} ended in error", file=sys.stderr)
        return EXIT_RUN_ERROR
    return EXIT_BELOW_MIN_PASS if failed else EXIT_OK


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in name)


def _show(line: dict[str, Any]) -> None:
    verdict = "pass" if line.get("passed") else "FAIL"
    detail = line.get("divergence") or line.get("error") or ""
    if not detail and not line.get("passed"):
        failed = [s["name"] for s in line.get("scores") or [] if not s.get("passed")]
        detail = "failed: " + ", ".join(failed) if failed else ""
    if line.get("volatile_results"):
        taken = f"(taken as they came: {', '.join(line['volatile_results'])})"
        detail = f"{detail} {taken}".strip()
    tokens = (line.get("usage") or {}).get("total_tokens", 0)
    text = f"{line['key']}: {verdict} ({line.get('status')}, {tokens:,} tokens)"
    print(f"{text} {detail}".rstrip(), file=sys.stderr)

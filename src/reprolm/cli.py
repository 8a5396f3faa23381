"""The ``reprolm`` command: questions about a run's results, from its provenance records.

    reprolm lineage PATH [--json] [--params]   what is behind a result
    reprolm verify [PATH ...] [--against ROOT] which recorded artifacts are no longer as recorded
    reprolm cost PATH [PATH ...] [--json]      GPU-, CPU- and wall hours behind results, by stage
    reprolm plan [--configfile F] [--width N]  what a run will cost, before it starts
    reprolm impact [--configfile F | --config KEY=VALUE ... | --rev REV]  what a change will rerun, and its cost
    reprolm rehearse [--configfile F] [--profile P]  whether the cluster accepts every job's request
    reprolm progress [--since 2h|ISO]          one line per job of the run: status, wall time, progress
    reprolm config-docs [--output F]           the configuration keys page, from the config schema
    reprolm lock --configfile F [--check | --update [NAME ...]]  pin every remote input of a config

Run it in the workflow's folder (the records' paths are relative to it), or give ``--root``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

from reprolm import lock
from reprolm.config.overlays import load
from reprolm.config_docs import KEYS_PAGE, SCHEMA_FILE, write_keys_page
from reprolm.errors import ConfigError
from reprolm.impact import impact
from reprolm.need import DEVICES
from reprolm.plan import plan
from reprolm.provenance.cost import cost_table, lineage_jobs, summary
from reprolm.provenance.query import format_tree, lineage, verify, verify_downloads
from reprolm.run_summary import parse_since, run_jobs, run_summary

DEFAULT_VERIFIED = ("results", "resources")


def not_a_run_folder(root: str) -> str | None:
    """Why ``root`` is not a folder the workflow ran in (it has neither results/ nor
    resources/), or None."""
    folder = Path(root)
    if any((folder / name).is_dir() for name in DEFAULT_VERIFIED):
        return None
    return (
        f"{folder.resolve()} is not a run folder (no results/ or resources/ there): "
        "run reprolm where the workflow ran, or give --root"
    )


def lock_command(args) -> int:
    root = Path(args.root)
    config_file = root / args.configfile
    if not config_file.is_file():
        print(f"reprolm lock: {config_file}: no such config file", file=sys.stderr)
        return 2
    path = lock.lock_path([config_file])
    try:
        if args.check:
            entries = lock.read_lock(path)
            if not entries:
                print(
                    f"reprolm lock --check: {path}: no lock yet (make it: reprolm lock --configfile {args.configfile})"
                )
                return 1
            moved, untold = lock.check(entries)
            for item in moved:
                print(f"{item.key}: moved upstream: locked {item.locked}, now {item.now}")
            for line in untold:
                print(f"{line}", file=sys.stderr)
            unlocked = lock.unlocked(load(config_file, root), entries)
            for key in unlocked:
                print(f"{key}: not locked")
            print(
                f"{len(entries)} locked inputs checked against upstream: {len(moved)} moved, {len(unlocked)} not locked",
                file=sys.stderr,
            )
            return 1 if moved or unlocked else 0
        update = None if args.update is None else (args.update or list(lock.read_lock(path)))
        entries = lock.lock(load(config_file, root), path, args.configfile, update=update)
    except lock.LockError as error:
        print(f"reprolm lock: {error}", file=sys.stderr)
        return 2
    print(f"{path}: {len(entries)} inputs locked", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="reprolm", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=".", help="the folder the workflow ran in (default: here)")
    commands = parser.add_subparsers(dest="command", required=True)
    lineage_parser = commands.add_parser("lineage", help="the chain of artifacts behind a result")
    lineage_parser.add_argument("path", help="a result: a file or folder the workflow made")
    lineage_parser.add_argument("--json", action="store_true", help="print the lineage as JSON")
    lineage_parser.add_argument("--params", action="store_true", help="show each step's params in the tree")
    verify_parser = commands.add_parser("verify", help="re-hash recorded artifacts; exit 1 if any changed")
    verify_parser.add_argument(
        "paths",
        nargs="*",
        default=list(DEFAULT_VERIFIED),
        help="artifacts or folders to check (default: results resources)",
    )
    verify_parser.add_argument(
        "--against",
        metavar="ROOT",
        help="check the downloads under the paths (their records' `read`: commits and sha256s, and their files) "
        "against the records of the same artifacts in the run folder ROOT",
    )
    cost_parser = commands.add_parser("cost", help="GPU-hours behind results (each shared job once), by stage")
    cost_parser.add_argument("paths", nargs="+", help="results: tables, plots, models, scores")
    cost_parser.add_argument("--json", action="store_true", help="print the table as JSON records")
    plan_parser = commands.add_parser("plan", help="estimated GPU-hours, wall time, memory and disk of a run")
    plan_parser.add_argument("--configfile", help="the run's config (default: the embedded config/config.yaml)")
    plan_parser.add_argument("--width", type=int, default=8, help="GPUs the run may use at once (default 8)")
    plan_parser.add_argument("--device", default="h100", choices=sorted(DEVICES), help="what the GPU jobs run on")
    plan_parser.add_argument("--json", action="store_true", help="print the per-job estimates as JSON")
    impact_parser = commands.add_parser(
        "impact", help="the jobs a change reruns, why (Snakemake's rerun triggers) and their cost, before any runs"
    )
    change = impact_parser.add_mutually_exclusive_group(required=True)
    change.add_argument("--configfile", help="the changed config, against the run's")
    change.add_argument(
        "--config",
        nargs="+",
        metavar="KEY=VALUE",
        help="the run's config with these keys set (dotted, list items by position: length_targets.5.pm=[190,null])",
    )
    change.add_argument("--rev", help="the working tree's code and config against this git revision's")
    impact_parser.add_argument("--width", type=int, default=8, help="GPUs the reruns may use at once (default 8)")
    impact_parser.add_argument("--device", default="h100", choices=sorted(DEVICES), help="what the GPU jobs run on")
    rehearse_parser = commands.add_parser(
        "rehearse", help="every distinct sbatch request judged by the cluster (sbatch --test-only); exit 1 if not ready"
    )
    rehearse_parser.add_argument(
        "--configfile", nargs="+", default=[], help="the run's config files (default: the embedded config/config.yaml)"
    )
    rehearse_parser.add_argument("--profile", help="the run's Snakemake profile (default: profiles/slurm)")
    rehearse_parser.add_argument("--workflow-profile", help="the run's --workflow-profile, if it gives one")
    rehearse_parser.add_argument(
        "--sizes",
        action="store_true",
        help="also run the dataset builds and the score jobs at the papers' sizes against their requests "
        "(a score job that asks for a GPU as a SLURM job with its request)",
    )
    rehearse_parser.add_argument(
        "--rows",
        nargs="+",
        default=[],
        metavar="SOURCE=N",
        help="rows to generate for a source not downloaded yet (with --sizes)",
    )
    rehearse_parser.add_argument(
        "--stand-in",
        nargs="*",
        metavar="RULE",
        help="also run one job of each rule x model family x resource class on tiny stand-in models "
        "through the profile (of the rules named; all if none)",
    )
    rehearse_parser.add_argument(
        "--hub-mirror", help="a folder of hub repositories ({owner}/{name}/) read instead of the hub"
    )
    progress_parser = commands.add_parser("progress", help="one line per job of the run: status, wall time, progress")
    progress_parser.add_argument(
        "--since", help="jobs since then: 2h, 30m, or an ISO time (default: the latest snakemake run's start)"
    )
    config_docs_parser = commands.add_parser(
        "config-docs", help="write the configuration keys page (Markdown) from the config schema's descriptions"
    )
    config_docs_parser.add_argument(
        "--schema", default=str(SCHEMA_FILE), help=f"the config schema (default: {SCHEMA_FILE})"
    )
    config_docs_parser.add_argument(
        "--output", default=str(KEYS_PAGE), help=f"the page to write (default: {KEYS_PAGE})"
    )
    lock_parser = commands.add_parser(
        "lock", help="resolve every remote input of a config to an immutable revision, into the lock beside it"
    )
    lock_parser.add_argument("--configfile", required=True, help="the run's config, e.g. config/paper.yaml")
    lock_mode = lock_parser.add_mutually_exclusive_group()
    lock_mode.add_argument(
        "--check",
        action="store_true",
        help="say what moved upstream since the lock, downloading nothing; exit 1 if any",
    )
    lock_mode.add_argument(
        "--update", nargs="*", metavar="NAME", help="resolve these entries again (keys or names; all if none)"
    )
    args = parser.parse_args(argv)

    if args.command == "lock":
        return lock_command(args)

    if args.command == "config-docs":
        print(write_keys_page(args.schema, args.output))
        return 0

    if args.command == "progress":
        now = datetime.datetime.now().astimezone()
        since = parse_since(args.since, now) if args.since else None
        print(run_summary(run_jobs(args.root, since, now)))
        return 0

    if args.command == "rehearse":
        # Imported here: it loads Snakemake, which the other commands do not need.
        from reprolm.rehearse.rehearsal import DEFAULT_PROFILE, DagError, StandInOptions, rehearse

        try:
            try:
                rows = {source: int(count) for source, count in (item.split("=", 1) for item in args.rows)}
            except ValueError:
                rehearse_parser.error(f"--rows: expected SOURCE=N (a whole number of rows), got {' '.join(args.rows)}")
            rehearsal = rehearse(
                args.configfile,
                args.profile or DEFAULT_PROFILE,
                args.workflow_profile,
                sizes=rows if args.sizes else None,
                stand_in=None
                if args.stand_in is None
                else StandInOptions(args.stand_in, Path(args.hub_mirror) if args.hub_mirror else None),
            )
        except DagError as error:
            print(f"not ready: {error}", file=sys.stderr)
            return 1
        print(rehearsal.report())
        return 0 if rehearsal.ready else 1

    if args.command == "impact":
        try:
            found = impact(args.root, args.configfile, args.config or (), args.rev, args.width, args.device)
        except (FileNotFoundError, ValueError) as error:
            print(f"reprolm impact: {error}", file=sys.stderr)
            return 2
        print(found.report())
        return 0

    if args.command == "plan":
        try:
            estimate = plan(args.root, args.configfile, width=args.width, device=args.device)
        except (FileNotFoundError, ConfigError) as error:
            print(f"reprolm plan: {error}", file=sys.stderr)
            return 2
        if args.json:
            print(
                json.dumps(
                    [
                        {
                            "rule": j.rule,
                            "wildcards": j.wildcards,
                            "stage": j.stage,
                            "gpus": j.gpus,
                            "seconds": j.seconds,
                            "basis": j.basis,
                            "peak_gpu_gb": j.peak_gpu_gb,
                            "checkpoint_gb": j.checkpoint_gb,
                        }
                        for j in estimate.jobs
                    ],
                    indent=2,
                )
            )
        else:
            print(estimate.table().to_string(index=False, float_format=lambda v: f"{v:.4g}"))
            print(estimate.summary())
        return 0

    if args.command == "cost":
        try:
            table = cost_table(lineage_jobs(args.paths, root=args.root))
        except FileNotFoundError as error:
            print(f"reprolm cost: {error}", file=sys.stderr)
            return 2
        if args.json:
            print(table.to_json(orient="records", indent=2))
        else:
            print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
            print(summary(table, " + ".join(args.paths)))
        return 0

    if args.command == "lineage":
        try:
            graph = lineage(args.path, root=args.root)
        except FileNotFoundError as error:
            problem = not_a_run_folder(args.root)
            print(f"reprolm lineage: {f'{args.path}: {problem}' if problem else error}", file=sys.stderr)
            return 2
        print(json.dumps(graph, indent=2, sort_keys=True) if args.json else format_tree(graph, show_params=args.params))
        return 0

    root = Path(args.root)
    # The default paths need not both be there; paths given must.
    absent = [path for path in args.paths if not (root / path).exists()]
    problem = not_a_run_folder(args.root)
    if not problem and absent and args.paths != list(DEFAULT_VERIFIED):
        problem = f"not in {root.resolve()}: {', '.join(absent)}"
    if problem:
        print(f"reprolm verify: {problem}", file=sys.stderr)
        return 2
    result = (
        verify(args.paths, root=args.root)
        if args.against is None
        else verify_downloads(args.paths, args.against, root=args.root)
    )
    if result.checked == 0:
        print(
            f"reprolm verify: no provenance records under {', '.join(args.paths)} in {root.resolve()}", file=sys.stderr
        )
        return 2
    for finding in result.findings:
        print(f"{finding.path}: {finding.problem}")
    print(f"{result.checked} records checked, {len(result.findings)} problems", file=sys.stderr)
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())

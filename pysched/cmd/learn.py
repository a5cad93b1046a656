"""`pysched learn train|evaluate|tune`: train a queue-ordering or an allocation policy on the
simulator and compare it with the built-in policies on held-out seeds, or tune Autoscale's args
online with a bandit. Training needs the `learn` extra; the rest needs numpy only."""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import TYPE_CHECKING

from pysched.api.limits import MAX_SEED
from pysched.cmd.errors import bad_input
from pysched.cmd.flags import (
    clash_problem,
    empty_problem,
    extra_problem,
    first_problem,
    number_problem,
    output_file,
    output_problem,
    parse_seed,
    write_output,
    write_problem,
)

if TYPE_CHECKING:  # the training stack is imported only when training
    from pysched.learn.train import Trained

ENVS = ("ordering", "allocation")
MAX_STEPS = 100_000_000
MAX_SEEDS = 10_000
SEED_RANGE = re.compile(r"([0-9]{1,10})-([0-9]{1,10})")  # ASCII: `\d` takes other scripts' digits too


def _fail(message: str) -> int:
    return bad_input("pysched learn", message)


def parse_seeds(text: str) -> range | str:
    """`A-B` (inclusive) as a range, or the problem."""
    match = SEED_RANGE.fullmatch(text)
    if match is None:
        return f"--seeds: FIRST-LAST (e.g. 1000-1099), got {text[:40]!r}"
    first, last = int(match[1]), int(match[2])
    if last > MAX_SEED:
        return f"--seeds: seeds from 0 to {MAX_SEED:,}, got {text!r}"
    if last < first or last - first + 1 > MAX_SEEDS:
        return f"--seeds: FIRST <= LAST and at most {MAX_SEEDS:,} seeds, got {text!r}"
    return range(first, last + 1)


def cmd_train(args: argparse.Namespace) -> int:
    from pysched.sim.scenario import SCENARIOS, scenario_or_mix

    scenario = scenario_or_mix(args.scenario)
    problem = first_problem(
        empty_problem("--init", args.init, "a file name"),
        extra_problem("pysched learn train", "sb3_contrib", "sb3-contrib and torch", "learn"),
        number_problem("--steps", args.steps, 0, MAX_STEPS),
        number_problem("--window", args.window, 2, 256),
        number_problem("--envs", args.envs, 1, 16),
        number_problem("--warm-episodes", args.warm_episodes, 0, 1000),
        None
        if scenario is not None
        else f"--scenario: one of {', '.join(SCENARIOS)}, or several of them joined by commas (each once)",
        output_problem("--out", args.out),
        output_problem("--curve", args.curve) if args.curve is not None else None,
        output_problem("--curve-json", args.curve_json) if args.curve_json is not None else None,
        extra_problem("--curve", "matplotlib", "matplotlib", "plot") if args.curve else None,
        clash_problem(
            [("--out", args.out), ("--curve", args.curve), ("--curve-json", args.curve_json)], [("--init", args.init)]
        ),
    )
    if problem:
        return _fail(problem)
    assert scenario is not None  # else first_problem named it
    from pysched.deadline.scorer import PolicyFileError, load_policy
    from pysched.learn.base import TRAIN_SEEDS, allocation_has_jobs, policy_kind
    from pysched.learn.episodes import ALLOCATION_ENV, ORDERING_ENV
    from pysched.learn.ranges import RANGE_SEEDS

    if args.env == ALLOCATION_ENV and not allocation_has_jobs(scenario, TRAIN_SEEDS[:RANGE_SEEDS]):
        return _fail(
            f"--scenario {args.scenario}: its workloads hold no CPU job with a deadline, and the allocation "
            "environment decides only the CPUs of those"
        )

    if args.init:
        try:
            scorer = load_policy(args.init, policy_kind(args.env))
        except PolicyFileError as err:
            return _fail(f"--init: {err}")
        if args.env == ORDERING_ENV and scorer.window < args.window:  # an allocation policy reads rows one by one
            return _fail(f"--init: its window is {scorer.window}, less than --window {args.window}")
    from pysched.learn.train import TrainSettings, load_for_tuning, train

    settings = TrainSettings(
        steps=args.steps, seed=args.seed, window=args.window, envs=args.envs,
        warm_episodes=0 if args.init else args.warm_episodes, scenario=scenario, env=args.env,
        trained_before=scorer.ranges() if args.init else {},
    )  # fmt: skip
    command = (
        f"pysched learn train --env {args.env} --steps {args.steps} --envs {args.envs} --seed {args.seed} "
        f"--window {args.window} --warm-episodes {args.warm_episodes} --scenario {args.scenario}"
        + (f" --init {args.init}" if args.init else "")
    )  # what reproduces the weights (outputs left out), however the command was called
    meta = {
        "command": command, "seed": str(args.seed), "steps": str(args.steps), "scenario": str(args.scenario),
        "env": str(args.env),
    }  # fmt: skip
    try:
        model = load_for_tuning(args.init, settings) if args.init else None
    except ValueError as err:
        return _fail(f"--init: {err}")
    trained, _ = train(settings, meta, model, report=lambda line: print(line, file=sys.stderr, flush=True))
    try:
        _write_trained(args, trained)
    except OSError as err:  # a full disk, a folder removed during training
        return _fail(write_problem(err))
    return 0


def _write_trained(args: argparse.Namespace, trained: Trained) -> None:
    """The weights, a summary line, and the curves asked for."""
    write_output(args.out, trained.text)
    ratios = [r for _, r, _ in trained.curve.points]
    tail = ratios[-20:]
    summary = {
        "out": args.out,
        "seconds": round(trained.seconds, 1),
        "episodes": len(ratios),
        "ppo_steps": trained.steps_taken,
        "warm_agreement": None
        if trained.warm_agreement != trained.warm_agreement
        else round(trained.warm_agreement, 3),
        "last_episodes_met_ratio": round(sum(tail) / len(tail), 4) if tail else None,
        "bytes": len(trained.text),
    }
    print(json.dumps(summary))
    if args.curve:
        from pysched.learn.plots import training_curve

        training_curve(trained.curve.points, str(output_file(args.curve)), trained.validation)
    if args.curve_json:
        curve = {"points": trained.curve.points, "validation": trained.validation}
        write_output(args.curve_json, json.dumps(curve) + "\n")


def cmd_evaluate(args: argparse.Namespace) -> int:
    from pysched.sim.scenario import SCENARIOS

    seeds = parse_seeds(args.seeds)
    problem = first_problem(
        empty_problem("--weights", args.weights, "a file name"),
        seeds if isinstance(seeds, str) else None,
        None if args.scenario in SCENARIOS else f"--scenario: one of {', '.join(SCENARIOS)}",
        output_problem("--json", args.json) if args.json is not None else None,
        clash_problem([("--json", args.json)], [("--weights", args.weights)]),
    )
    if problem:
        return _fail(problem)
    assert isinstance(seeds, range)
    from pysched.deadline.scorer import PolicyFileError, load_policy
    from pysched.framework.config import ConfigError
    from pysched.learn.base import policy_kind
    from pysched.learn.episodes import ALLOCATION_ENV
    from pysched.learn.evaluate import (
        ALLOCATION_POLICIES,
        MARGIN,
        POLICIES,
        allocation_config,
        evaluate,
        learned_config,
    )
    from pysched.learn.ordering import LEARNED_PROFILE
    from pysched.plugins import default_registry
    from pysched.sim.runner import PolicyStartError

    allocating = args.env == ALLOCATION_ENV
    if allocating and not args.weights:
        return _fail("--weights: an allocation policy's weights file is required with --env allocation")
    if args.weights:
        try:
            load_policy(args.weights, policy_kind(args.env))
        except PolicyFileError as err:
            return _fail(f"--weights: {err}")
    known = ALLOCATION_POLICIES if allocating else POLICIES
    policies = list(dict.fromkeys(args.policy or known))  # one row each, in the order first named
    if unknown := [p for p in policies if p not in known]:
        return _fail(f"--policy: unknown policy {unknown[0]!r} (known: {', '.join(known)})")
    registry = default_registry()
    try:
        config = allocation_config(registry, args.weights) if allocating else learned_config(registry, args.weights)
    except ConfigError as err:
        return _fail(str(err))
    done: list[int] = []
    try:
        result = evaluate(registry, config, args.scenario, seeds, policies, on_seed=done.append)
    except PolicyStartError as err:  # each seed builds the profiles again, reading --weights again
        at = seeds[len(done)]
        return _fail(f"seed {at}: {err} (--weights was accepted when the run began: did it change since?)")
    if args.json:  # before the table: a reader of it that stops early (`| head`) must not lose the file
        try:
            write_output(args.json, json.dumps(result.as_json(), indent=1) + "\n")
        except OSError as err:
            return _fail(write_problem(err))
    print(f"{args.scenario}, seeds {seeds.start}-{seeds.stop - 1}: median deadline-met ratio")
    for policy in policies:
        print(f"  {policy:<20} {result.median(policy):.3f}")
    if LEARNED_PROFILE in policies and {"edf", "pysched-noscale"} <= set(policies):
        reached = f"{result.seeds_at_bar()}/{len(seeds)}"
        print(f"  learned reaches the better of edf and pysched-noscale + {MARGIN} on {reached} seeds")
    return 0


def cmd_tune(args: argparse.Namespace) -> int:
    from pysched.learn.tuning import DEFAULT_ARMS, MAX_ARMS, parse_arm
    from pysched.sim.scenario import SCENARIOS

    seeds = parse_seeds(args.seeds)
    arms = [parse_arm(text) for text in args.arm or ()]
    problem = first_problem(
        seeds if isinstance(seeds, str) else None,
        None if args.scenario in SCENARIOS else f"--scenario: one of {', '.join(SCENARIOS)}",
        next((a for a in arms if isinstance(a, str)), None),
        f"--arm: at most {MAX_ARMS}" if len(arms) > MAX_ARMS else None,
        number_problem("--period", args.period, 60, 30 * 86400),
        output_problem("--json", args.json) if args.json is not None else None,
    )
    if problem:
        return _fail(problem)
    assert isinstance(seeds, range)
    from pysched.learn.tuning import compare

    played = [a for a in arms if isinstance(a, dict)] or [dict(a) for a in DEFAULT_ARMS]
    report = compare(args.scenario, seeds, played, args.period, lambda line: print(line, flush=True))
    print(json.dumps(report.summary()))
    if args.json:
        try:
            write_output(args.json, json.dumps(report.as_json(), indent=1) + "\n")
        except OSError as err:
            return _fail(write_problem(err))
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `learn train`, `learn evaluate` and `learn tune` to the CLI."""
    learn = subparsers.add_parser("learn", help="train and evaluate learned policies on the simulator")
    sub = learn.add_subparsers(dest="learn_command", required=True)
    train = sub.add_parser(
        "train", help="train a queue-ordering or allocation policy (needs pysched[learn]) and write its weights"
    )
    train.add_argument(
        "--env",
        choices=ENVS,
        default="ordering",
        help="ordering (which waiting pod goes next) or allocation (each running job down, keep or up); "
        "default ordering",
    )
    train.add_argument(
        "--steps",
        type=int,
        required=True,
        help="PPO environment steps after the warm start (each validation period rounded up to whole rollouts)",
    )
    train.add_argument("--out", required=True, metavar="FILE", help="the weights file to write (JSON)")
    train.add_argument(
        "--seed", type=parse_seed, default=0, help="seed of the network, PPO and the workload draws, 0 to 2**32-1"
    )
    train.add_argument(
        "--window", type=int, default=16, help="pods the policy picks among, or jobs it answers at once (default 16)"
    )
    train.add_argument("--envs", type=int, default=1, help="environments in parallel processes (default 1)")
    train.add_argument(
        "--warm-episodes",
        type=int,
        default=16,
        help="episodes per round of the warm start (ordering: 3 rounds; default 16; 0: none)",
    )
    train.add_argument(
        "--scenario",
        default="seed-insufficient",
        help="the generator (default seed-insufficient), or several joined by commas, taken in turn by workload seed",
    )
    train.add_argument("--init", metavar="FILE", help="fine-tune from this weights file (no warm start)")
    train.add_argument("--curve", metavar="PNG", help="also draw the training curve here")
    train.add_argument("--curve-json", metavar="FILE", help="also write the training curve's points here")
    train.set_defaults(func=cmd_train)
    ev = sub.add_parser("evaluate", help="the built-in policies and a learned one side by side on held-out seeds")
    ev.add_argument(
        "--env",
        choices=ENVS,
        default="ordering",
        help="ordering: the built-in policies and the learned order; allocation: pysched and pysched-allocation "
        "(LearnedAutoscale reading --weights)",
    )
    ev.add_argument(
        "--weights", metavar="FILE", help="the learned policy (ordering default: the shipped one; allocation: required)"
    )
    ev.add_argument("--scenario", default="seed-insufficient", help="the generator (default seed-insufficient)")
    ev.add_argument("--seeds", default="1000-1099", help="FIRST-LAST workload seeds (default 1000-1099)")
    ev.add_argument("--policy", action="append", metavar="NAME", help="a policy to run; repeatable; default: all")
    ev.add_argument("--json", metavar="OUT", help="also write the ratios per seed here")
    ev.set_defaults(func=cmd_evaluate)
    tune = sub.add_parser(
        "tune",
        help="the pysched profile with its Autoscale args chosen online by a bandit, against the profile as "
        "configured, seed by seed",
    )
    tune.add_argument("--scenario", default="small", help="the generator (default small)")
    tune.add_argument("--seeds", default="1000-1019", help="FIRST-LAST workload seeds (default 1000-1019)")
    tune.add_argument(
        "--arm",
        action="append",
        metavar="NAME=VALUE[,...]",
        help="one set of Autoscale args the bandit may play (safetyMargin, bandZ, downSlack, cooldownSeconds, "
        "maxStepFactor); repeatable; default: safetyMargin 0.05 (the default), 0 and 0.3",
    )
    tune.add_argument("--period", type=float, default=1800.0, help="simulated seconds each choice lasts (default 1800)")
    tune.add_argument("--json", metavar="OUT", help="also write the ratios per seed and the bandit's pulls here")
    tune.set_defaults(func=cmd_tune)

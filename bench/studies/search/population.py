"""Benchmark: the population of a small slot's evolutionary search, in trials a minute and in quality per trial.

::

    .venv/bin/python bench/studies/search/population.py --model mobilenetv2 --minutes 5 --trials-per-slot 4 \
        --floors 128,16 \
        --out bench/studies/search/results/population-mobilenetv2-slot4.json
    .venv/bin/python bench/studies/search/population.py --model resnet18 --minutes 8 --trials-per-slot 16 \
        --per-candidate 8,4 \
        --out bench/studies/search/results/population-resnet18-per-candidate.json

For each ``--floors`` value in turn, one run of our loop (the defaults of :class:`tunewise.settings.RunSettings`
but ``--trials-per-slot``, the cold filter on) tunes the model from an empty store for ``--minutes`` minutes,
its searches evolving a population of eight members a candidate of the slot, at least the floor
(:data:`tunewise.tuning.search.MIN_POPULATION`), with at most half of it (and at most 50) sampled at random. A floor
of 128 is a population of 128 with 50 random members for any slot of 16 or fewer. The arms run one after the
other in one process, on one extraction and one measurer, and record what :mod:`generations` records.

With ``--per-candidate`` instead, each arm evolves that many members a candidate of the slot
(:data:`tunewise.tuning.search.POPULATION_PER_CANDIDATE`), at the default floor.
"""

from __future__ import annotations

import argparse

from generations import run_arms

from tunewise.job import prepare
from tunewise.settings import RunSettings
from tunewise.target import resolve
from tunewise.tuning import search, session, tvm_env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="mobilenetv2")
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--trials-per-slot", type=int, default=4)
    parser.add_argument("--floors", default="128,16", help="comma-separated population floors, one arm each")
    parser.add_argument("--per-candidate", help="comma-separated members a candidate, one arm each, at the default "
                                                "floor (instead of --floors)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    tvm_env.prepare("llvm")
    target = resolve(None)
    key = {"model": args.model, "seed": args.seed, "minutes": args.minutes, "trials_per_slot": args.trials_per_slot,
           "target": str(target)}
    settings = RunSettings(source=args.model, seed=args.seed, budget=session.Budget(max_trials=10**7),
                           trials_per_slot=args.trials_per_slot, candidate_filter="cold")
    # each arm sets one of the search's population constants: members a candidate, or the floor
    knob, values, name = (("POPULATION_PER_CANDIDATE", args.per_candidate, "{} a candidate") if args.per_candidate
                          else ("MIN_POPULATION", args.floors, "{}"))
    arms = {name.format(value): (search.GENERATIONS, lambda n=int(value): setattr(search, knob, n))
            for value in values.split(",")}
    measurer = prepare.make_measurer(target, settings)
    results = {}
    try:
        model = prepare.load_model(args.model, settings, target=target, measurer=measurer)
        run_arms(model, settings, measurer, arms, args.minutes, args.out, key, results)
    finally:
        measurer.close()


if __name__ == "__main__":
    main()

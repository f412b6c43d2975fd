"""Run settings: one set of defaults for the CLI, the API and the store; the JSON form and its upgrades."""

import dataclasses
import json
import re

import pytest

from tunewise import cli, energy, schedulers, stores
from tunewise.budget import Budget
from tunewise.delivery import timing
from tunewise.errors import InputError
from tunewise.job import workflow
from tunewise.settings import ADDED_KEYS, RunSettings
from tunewise.tuning import model_checks
from tunewise.tuning.measure import MeasureConfig


def old_form(output: str) -> dict:
    """The settings ``tunewise tune tiny-mlp --trials 2 --trials-per-slot 2 -o OUTPUT`` stored when runs first
    had settings (commit 4d06c26): no ``share`` (sharing came later), no ``runner``."""
    return {"source": "tiny-mlp", "scheduler": "gradient", "input_shapes": {},
            "budget": {"max_trials": 2, "time_budget": None, "per_task_trials": None, "patience": None},
            "trials_per_slot": 2, "level": "fold-bn", "seed": 0, "evaluator": "fixed", "cost_model": "xgb",
            "output": output,
            "measure": {"number": 3, "repeat": 1, "min_repeat_ms": 100, "enable_cpu_cache_flush": False,
                        "build_timeout": 30.0, "run_timeout": 30.0, "builder_workers": 0, "overlap": False}}


def test_json_round_trip_through_a_store():
    settings = RunSettings(source="/models/m.onnx", scheduler="random", input_shapes={"x": (2, 3)},
                           budget=Budget(max_trials=50, time_budget=90.0, patience=8), trials_per_slot=4,
                           level="fold-bn", seed=3, evaluator="fixed", cost_model="rfei", share="selective",
                           warm_start=False, output="/out", measure=MeasureConfig(number=5, overlap=True))
    store = stores.create("sqlite://")
    run = store.create_run("m", "llvm", "random", settings.to_json())
    assert RunSettings.from_json(store.get_run(run).settings) == settings
    assert json.loads(json.dumps(settings.to_json())) == settings.to_json()


def test_an_old_form_gets_the_values_its_run_was_tuned_with():
    settings = RunSettings.from_json(old_form("/out"))
    # the run tuned every task alone (no sharing then), not with today's default
    assert settings.share == "off" and RunSettings().share == "same-anchor"
    assert settings.warm_start is False and RunSettings().warm_start is True
    assert settings.runner == "local"
    assert (settings.scheduler, settings.level, settings.evaluator, settings.budget) == (
        "gradient", "fold-bn", "fixed", Budget(max_trials=2))
    # an evaluator or cost model missing: what the code always ran for them, not today's adaptive default
    bare = RunSettings.from_json({k: v for k, v in old_form("/out").items() if k not in ("evaluator", "cost_model")})
    assert (bare.evaluator, bare.cost_model) == ("fixed", "xgb") and RunSettings().evaluator == "adaptive"
    # checked only with a goal or diminishing, as such runs were, not every 360 s as a new run is
    assert settings.check_interval is None and RunSettings().check_interval == model_checks.DEFAULT_EVERY
    assert dataclasses.replace(settings, diminishing=-0.25).check_interval == model_checks.DEFAULT_EVERY
    assert set(ADDED_KEYS) == {"share", "warm_start", "evaluator", "cost_model", "runner", "goal", "energy_budget",
                               "diminishing", "check_every", "energy_meter", "candidate_filter", "give_up",
                               "references", "timing_rounds", "time_untuned", "records_base", "pretrained",
                               "precision"}
    # no record base: none existed, today's runs read the bundled one
    assert settings.records_base == "off" and RunSettings().records_base == "bundled"
    # finished as every run was before its finish was stored: references timed, the default rounds, untuned estimated
    assert (settings.references, settings.timing_rounds, settings.time_untuned) == (True, timing.ROUNDS, False)
    # tuned from an untrained cost model, as every run was before a pretrained one shipped
    assert settings.pretrained is False and RunSettings().pretrained is True
    # computed in float32, as every run was before there was a choice
    assert settings.precision == "float32" == RunSettings().precision


@pytest.mark.parametrize("stored,mode", [(True, "same-anchor"), (False, "off")])
def test_a_run_stored_with_share_true_or_false_reads_as_the_mode_it_was_tuned_with(stored, mode):
    settings = RunSettings.from_json({**old_form("/out"), "share": stored})
    assert settings.share == mode
    assert RunSettings.from_json(settings.to_json()) == settings and settings.to_json()["share"] == mode


@pytest.mark.parametrize("data,expected", [
    ({}, "not a tuning run's settings: they lack source, scheduler"),
    ({"recording": "replay trace"}, "they lack source"),
    ({**old_form("/out"), "turbo": True}, "keys this version of tunewise does not know: turbo"),
    ({**old_form("/out"), "measure": {"number": 3, "warp": 9}}, "bad measure"),
    ({**old_form("/out"), "level": "max"}, "unknown graph level 'max'"),
    ({**old_form("/out"), "runner": "rpc"}, "unknown runner 'rpc'; valid names: local"),
])
def test_settings_that_are_not_a_runs_are_refused_in_one_line(data, expected):
    with pytest.raises(InputError) as err:
        RunSettings.from_json(data)
    assert expected in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("changes,expected", [
    ({"trials_per_slot": 0}, "trials per slot must be positive"),
    ({"seed": -1}, "seed must be a whole number of at least 0"),
    ({"scheduler": "fastest"}, "unknown scheduler 'fastest'"),
    ({"evaluator": "stopwatch"}, "unknown evaluator 'stopwatch'"),
    ({"cost_model": "oracle"}, "unknown cost model 'oracle'"),
    ({"share": True}, "unknown sharing mode True; choose one of: off, same-anchor, selective"),
    ({"share": "sometimes"}, "unknown sharing mode 'sometimes'"),
    ({"warm_start": "yes"}, "warm start must be true or false"),
    ({"budget": {"max_trials": 3}}, "budget must be a tunewise Budget"),
    ({"goal": "8ms", "give_up": 1.5}, r"give-up probability must be a number in \(0, 1\], got 1.5"),
    ({"goal": "8ms", "give_up": 0}, r"give-up probability must be a number in \(0, 1\], got 0"),
    ({"give_up": 0.9}, "giving up needs a latency goal to give up on"),
    ({"timing_rounds": 0}, "timing rounds must be a whole number of at least 1, got 0"),
    ({"references": "no"}, "references must be true or false"),
    ({"time_untuned": 1}, "time untuned must be true or false"),
    ({"records_base": 3}, "records base must be 'bundled', 'off' or a file's path, got 3"),
    ({"records_base": "/no/such/base.json.gz"}, "record base /no/such/base.json.gz is not a file"),
    ({"pretrained": "yes"}, "pretrained must be true or false"),
])
def test_bad_settings_are_refused(changes, expected):
    with pytest.raises(InputError, match=expected):
        RunSettings(**changes)


def test_whole_model_checks_every_interval_each_epoch_or_never():
    assert RunSettings(check_every=90.0).check_interval == 90.0
    assert RunSettings(check_every=model_checks.EPOCH).check_interval == model_checks.EPOCH
    assert RunSettings(check_every=model_checks.NEVER).check_interval is None
    for stop in ({"goal": "8ms"}, {"diminishing": -0.25}):
        with pytest.raises(InputError, match="stop on whole-model checks: they cannot run with model checks 'never'"):
            RunSettings(check_every=model_checks.NEVER, **stop)
    with pytest.raises(InputError, match="model-check interval must be a positive number, 'epoch' or 'never'"):
        RunSettings(check_every="sometimes")


def test_with_limits_replaces_only_the_limits_given():
    settings = RunSettings(budget=Budget(max_trials=10, patience=4))
    assert settings.with_limits({"max_trials": 20}).budget == Budget(max_trials=20, patience=4)
    assert settings.with_limits(Budget(time_budget=60.0)).budget == Budget(max_trials=10, time_budget=60.0, patience=4)
    with pytest.raises(InputError, match="unknown budget limits: trials"):
        settings.with_limits({"trials": 20})


def test_the_api_takes_settings_and_overrides_by_field_name():
    base = RunSettings(seed=3, budget=Budget(max_trials=10))
    settings, scheduler = workflow.with_overrides(base, {"share": "off", "budget": None, "measure": None})
    assert settings == dataclasses.replace(base, share="off") and scheduler == base.scheduler
    custom = schedulers.create("random", seed=1)
    settings, scheduler = workflow.with_overrides(base, {"scheduler": custom})
    assert scheduler is custom and settings.scheduler is None
    with pytest.raises(InputError, match="unknown settings measure_config, trials; valid: source, scheduler"):
        workflow.with_overrides(base, {"trials": 5, "measure_config": None})


def test_a_cli_flag_reaches_the_run_through_its_settings_alone(monkeypatch, tmp_path):
    """``tunewise tune``'s options are read once, into the RunSettings the run is prepared from."""
    reached = []

    def prepared(source, settings, **kwargs):
        reached.append((source, settings))
        raise InputError("stop here")

    monkeypatch.setattr(workflow, "prepare_run", prepared)
    argv = ["tune", "tiny-mlp", "--seed", "7", "--share", "off", "--trials", "12", "--graph-level", "fold-bn",
            "--check-every", "90s", "--cache-flush", "-o", str(tmp_path / "out"), "--store", f"sqlite:///{tmp_path}/s.db"]
    assert cli.main(argv) == 2
    (source, settings), = reached
    assert source == "tiny-mlp" and settings.source == "tiny-mlp"
    assert (settings.seed, settings.share, settings.budget.max_trials, settings.level) == (7, "off", 12, "fold-bn")
    assert settings.check_every == 90.0 and settings.measure.enable_cpu_cache_flush
    assert settings.output == str(tmp_path / "out") and settings == RunSettings.from_json(settings.to_json())


def test_the_cli_leaves_every_unset_option_to_the_settings_and_shows_their_defaults(capsys):
    args = cli._parser().parse_args(["tune", "tiny-mlp"])
    assert cli._tune_options(args) == {}
    defaults = RunSettings()
    with pytest.raises(SystemExit) as exit_:
        cli.main(["tune", "--help"])
    assert exit_.value.code == 0
    shown = " ".join(capsys.readouterr().out.split())
    for text in (f"total trials (default {defaults.budget.max_trials} unless", f"(default: {defaults.scheduler})",
                 f"candidates per slot (default {defaults.trials_per_slot})", f"default: {defaults.evaluator})",
                 f"default: {defaults.cost_model})", "(default: winograd on a CPU, nhwc on a GPU)",
                 f"(default {defaults.seed})"):
        assert text in shown, text
    # the options given, and those only
    args = cli._parser().parse_args(["tune", "tiny-mlp", "--patience", "5", "--no-share", "--seed", "2"])
    assert RunSettings(source="tiny-mlp", **cli._tune_options(args)) == RunSettings(
        source="tiny-mlp", budget=dataclasses.replace(defaults.budget, patience=5), share="off", seed=2)
    for options, share in ((["--share", "selective"], "selective"), (["--share", "off"], "off"),
                           (["--no-share", "--share", "off"], "off")):
        assert cli._tune_options(cli._parser().parse_args(["tune", "m", *options]))["share"] == share
    assert cli._tune_options(cli._parser().parse_args(["tune", "m", "--no-warm-start"]))["warm_start"] is False
    assert cli._tune_options(cli._parser().parse_args(["tune", "m", "--no-pretrained"]))["pretrained"] is False
    assert cli._tune_options(cli._parser().parse_args(["tune", "m", "--cache-flush"]))["measure"] == \
        dataclasses.replace(defaults.measure, enable_cpu_cache_flush=True)
    assert f"(default {defaults.share}:" in shown


@pytest.mark.parametrize("options,expected", [
    (["--goal", "8ms", "--give-up", "1.5"], r"tunewise: error: give-up probability must be a number in \(0, 1\]"),
    (["--give-up", "0.9"], r"tunewise: error: giving up needs a latency goal to give up on: set a goal \(--goal\) too"),
    (["--goal", "8ms", "--give-up", "most"], "tunewise: error: bad --give-up 'most': expected a number"),
])
def test_a_bad_give_up_is_one_line_and_exit_2(capsys, options, expected):
    assert cli.main(["tune", "tiny-mlp", *options]) == 2
    err = capsys.readouterr().err.strip()
    assert re.match(expected, err) and "\n" not in err


def test_give_up_reaches_the_settings_and_their_stop_rules():
    args = cli._parser().parse_args(["tune", "m", "--goal", "8ms", "--give-up", "0.9"])
    settings = RunSettings(**cli._tune_options(args))
    assert settings.give_up == 0.9 and RunSettings.from_json(settings.to_json()) == settings
    from tunewise.job import prepare

    rules = prepare.stop_rules(settings, 8e-3)
    assert [type(r).__name__ for r in rules] == ["LatencyGoal", "GiveUp"]
    assert (rules[1].latency, rules[1].probability) == (8e-3, 0.9)
    assert [type(r).__name__ for r in prepare.stop_rules(RunSettings(goal="8ms"), 8e-3)] == ["LatencyGoal"]


def test_a_records_base_option_reaches_the_settings_and_a_missing_file_is_one_line_and_exit_2(capsys, tmp_path,
                                                                                             monkeypatch):
    assert cli._tune_options(cli._parser().parse_args(["tune", "m", "--records-base", "off"]))["records_base"] == "off"
    (tmp_path / "team.json.gz").write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    settings = RunSettings(**cli._tune_options(cli._parser().parse_args(["tune", "m", "--records-base",
                                                                          "team.json.gz"])))
    assert settings.records_base == str(tmp_path / "team.json.gz")  # absolute: a resume elsewhere finds it
    assert RunSettings.from_json(settings.to_json()) == settings
    assert cli.main(["tune", "tiny-mlp", "--records-base", "missing.json.gz"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("tunewise: error: record base missing.json.gz is not a file") and "\n" not in err


@pytest.mark.parametrize("options,expected", [
    (["--share", "everything"],
     "tunewise: error: unknown sharing mode 'everything'; choose one of: off, same-anchor, selective"),
    (["--no-share", "--share", "selective"], "tunewise: error: --no-share is --share off: drop one of"),
])
def test_a_bad_sharing_mode_is_one_line_and_exit_2(capsys, options, expected):
    assert cli.main(["tune", "tiny-mlp", *options]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(expected) and "\n" not in err


@pytest.mark.tvm
def test_the_cli_stores_the_settings_defaults_and_a_budget_option_on_resume_replaces_that_limit_only(tmp_path,
                                                                                                     capsys):
    url, out = f"sqlite:///{tmp_path}/tunewise.db", str(tmp_path / "out")
    assert cli.main(["tune", "--no-references", "--timing-rounds", "3", "--time-untuned",
                     "tiny-mlp", "--time-budget", "1h", "--trials", "2",
                     "--trials-per-slot", "2", "--cache-flush", "--share", "selective", "-o", out,
                     "--store", url]) == 0
    store = stores.create(url)
    # the meter "auto" chose here and the CPU's graph level are stored, so that a resumed run meters and
    # compiles as the run began; and so is its finish
    assert store.get_run(1).settings == RunSettings(
        source="tiny-mlp", budget=Budget(max_trials=2, time_budget=3600.0), trials_per_slot=2, output=out,
        energy_meter=energy.for_device("auto", gpu=False).name, level="winograd", share="selective",
        measure=MeasureConfig(enable_cpu_cache_flush=True), references=False, timing_rounds=3,
        time_untuned=True).to_json()

    # the limits given replace the stored ones, the others are kept, and the run finishes as it was started to
    assert cli.main(["tune", "--resume", "1", "--trials", "4", "--patience", "50", "--store", url]) == 0
    assert "PyTorch eager" not in capsys.readouterr().out
    stored = store.get_run(1).settings
    assert stored["budget"] == {
        "max_trials": 4, "time_budget": 3600.0, "per_task_trials": None, "patience": 50, "count_failures": True}
    assert stored["share"] == "selective"  # the run resumes sharing as it began
    assert (stored["references"], stored["timing_rounds"], stored["time_untuned"], stored["output"]) == (
        False, 3, True, out)
    assert len(store.get_trials(1)) == 4
    with open(f"{out}/metadata.json") as f:
        assert json.load(f)["timing"] == timing.describe(3, references=False, models=("untuned", "tuned"))

    # a finish option given again replaces the run's, and is kept for it
    again = str(tmp_path / "again")
    assert cli.main(["tune", "--resume", "1", "--timing-rounds", "2", "-o", again, "--store", url]) == 0
    stored = store.get_run(1).settings
    assert (stored["references"], stored["timing_rounds"], stored["time_untuned"], stored["output"]) == (
        False, 2, True, again)
    with open(f"{again}/metadata.json") as f:
        assert json.load(f)["timing"] == timing.describe(2, references=False, models=("untuned", "tuned"))
    capsys.readouterr()


@pytest.mark.tvm
def test_resuming_an_old_form_run_stores_it_in_full_and_tunes_it_as_it_was(tmp_path):
    url, out = f"sqlite:///{tmp_path}/tunewise.db", str(tmp_path / "out")
    store = stores.create(url)
    from tunewise import target

    run = store.create_run("tiny-mlp", str(target.resolve(None)), "gradient", old_form(out))
    assert cli.main(["tune", "--no-references", "--timing-rounds", "3", "--resume", str(run), "--store", url]) == 0
    stored = store.get_run(run).settings
    assert stored == dataclasses.replace(RunSettings.from_json(old_form(out)), references=False,
                                         timing_rounds=3).to_json() and stored["share"] == "off"
    with open(f"{out}/metadata.json") as f:
        metadata = json.load(f)
    assert (metadata["evaluator"], metadata["graph_level"], metadata["trials"]) == ("fixed", "fold-bn", 2)


def test_a_run_without_tuning_settings_is_refused_in_one_line(capsys, tmp_path):
    url = f"sqlite:///{tmp_path}/tunewise.db"
    stores.create(url).create_run("tiny-mlp", "llvm", "round-robin", {})  # as the bench scripts made them
    assert cli.main(["tune", "--resume", "1", "--store", url]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("tunewise: error: run 1 cannot be resumed: these are not a tuning run's settings")
    assert "\n" not in err

"""An eval's calls get the model's own output budget unless the run sets one."""

from __future__ import annotations

from hitrate.evals.settings import REPLAY_MAX_OUTPUT_TOKENS, EvalSettings


def _settings(**overrides) -> EvalSettings:
    return EvalSettings(suite="/suite", model="anthropic/claude-sonnet-5", **overrides)


def test_a_model_run_leaves_the_budget_to_the_models_default():
    # None reaches SessionConfig, whose session picks the per-model default (room for thinking on
    # models that think by default) instead of a fixed 4096 that thinking would use up.
    assert _settings().output_tokens is None


def test_replayed_runs_keep_replies_short_and_a_set_budget_wins():
    assert _settings(policy="replay").output_tokens == REPLAY_MAX_OUTPUT_TOKENS
    assert _settings(max_output_tokens=12_000).output_tokens == 12_000
    assert _settings(policy="replay", max_output_tokens=64).output_tokens == 64

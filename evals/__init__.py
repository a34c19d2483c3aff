"""hitrate.evals: task suites, the eval runner, grading, reports and provider what-if replay."""

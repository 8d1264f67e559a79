"""`kadence worker` options that are checked before anything connects."""

from click.testing import CliRunner

from kadence.cli.main import main


def test_max_concurrent_activities_must_be_positive():
    result = CliRunner().invoke(
        main, ["worker", "--task-queue", "q", "--module", "bench.workloads", "--max-concurrent-activities", "0"]
    )
    assert result.exit_code == 2
    assert "--max-concurrent-activities" in result.output and "0" in result.output


def test_max_concurrent_activities_is_documented_in_help():
    result = CliRunner().invoke(main, ["worker", "--help"])
    assert result.exit_code == 0 and "KADENCE_WORKER_MAX_ACTIVITIES" in result.output

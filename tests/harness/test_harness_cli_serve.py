"""`hitrate serve` refuses a bad or busy port at once, before loading any model."""

from __future__ import annotations

import socket

import typer
from typer.testing import CliRunner

from hitrate.harness.commands import serve as cli_serve


def _app() -> typer.Typer:
    app = typer.Typer()
    app.callback()(lambda: None)
    cli_serve.register(app)
    return app


def test_out_of_range_port_is_a_usage_error(tmp_path):
    result = CliRunner().invoke(_app(), ["serve", str(tmp_path / "no-model"), "--port", "99999"])
    assert result.exit_code == 2
    assert "--port" in result.output and "Traceback" not in result.output


def test_busy_port_fails_before_the_model_loads(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        # The model folder does not exist: had it tried to load first, the error would be about that.
        result = CliRunner().invoke(_app(), ["serve", str(tmp_path / "no-model"), "--port", str(port), "--local-files-only"])
    assert result.exit_code == 2
    assert f"cannot listen on 127.0.0.1:{port}" in result.output
    assert "serving" not in result.output

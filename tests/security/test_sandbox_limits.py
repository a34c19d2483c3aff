"""Limits for the whole sandbox, not per process: a process count and a memory limit for the
command's process tree (its cgroup), and bounded /tmp and /dev/shm.

As root, 700 processes ran against a policy of +512 (the kernel does not apply RLIMIT_NPROC to
root), and /tmp and /dev/shm were tmpfs of half the machine's memory outside every limit. Where no
cgroup can be written (an unprivileged user without delegation), the tree limits skip, naming why.
"""

from __future__ import annotations

import dataclasses

import pytest

from hitrate.tools import sandbox_cgroup
from hitrate.tools.confine import ConfinementPolicy, detect

pytestmark = [
    pytest.mark.skipif(detect().kind != "bubblewrap", reason=f"needs bubblewrap: {detect().detail}"),
    pytest.mark.timeout(120),
]


def _shell(registry, ctx, command: str, **policy):
    limited = dataclasses.replace(ctx, confinement=ConfinementPolicy(**policy))
    return registry.execute("shell", {"command": command, "timeout_s": 60}, limited)


def _cgroups_or_skip() -> None:
    with sandbox_cgroup.enter(64, 64 * 1024**2) as tree:
        if not tree.prefix:
            pytest.skip(tree.detail)


def test_the_process_tree_is_limited_even_for_root(registry, ctx) -> None:
    _cgroups_or_skip()
    # Forks counted by the process that makes them (a shell that cannot fork gives up altogether).
    command = (
        "python3 -c 'import os, time\nn = 0\nfor _ in range(100):\n    try:\n        pid = os.fork()\n"
        "    except OSError:\n        break\n    if pid == 0:\n        time.sleep(30)\n        os._exit(0)\n"
        "    n += 1\nprint(\"started\", n)'"
    )
    result = _shell(registry, ctx, command, max_tree_processes=32)
    started = int(result.content.split("started ")[1].split()[0])
    assert started < 32, result.content
    assert result.metadata["tree_limits"] in ("cgroup v1", "cgroup v2")


def test_memory_spread_over_processes_and_tmp_is_limited(registry, ctx) -> None:
    _cgroups_or_skip()
    # Each process stays far under the per-process limit; together they pass the tree's 256 MiB.
    command = (
        "for i in 1 2 3 4; do python3 -c 'import time; b = bytearray(96 * 1024 * 1024); b[::4096] = b\"x\" * len(b[::4096]); "
        "time.sleep(5); print(\"HELD\")' & done; wait; head -c 400000000 /dev/zero > /tmp/fill; echo tmp=$?"
    )
    result = _shell(registry, ctx, command, max_tree_memory_bytes=256 * 1024**2, tmpfs_bytes=None)
    assert result.content.splitlines().count("HELD") < 4, result.content
    assert "tmp=0" not in result.content


def test_tmp_and_dev_shm_are_bounded(registry, ctx) -> None:
    if "size" not in detect().features:
        pytest.skip("this bubblewrap cannot size a tmpfs (needs 0.8+)")
    command = "head -c 8000000 /dev/zero > /tmp/a; echo tmp=$?; head -c 8000000 /dev/zero > /dev/shm/a; echo shm=$?; df -k /tmp /dev/shm"
    result = _shell(registry, ctx, command, tmpfs_bytes=4 * 1024**2, max_tree_memory_bytes=None)
    assert "tmp=0" not in result.content and "shm=0" not in result.content, result.content


def test_the_cgroup_is_removed_after_the_command(registry, ctx) -> None:
    _cgroups_or_skip()
    import contextlib

    import hitrate.tools.confine as confine

    created: list = []
    real_enter = sandbox_cgroup.enter

    @contextlib.contextmanager
    def spy(*args, **kwargs):
        with real_enter(*args, **kwargs) as tree:
            created.extend(tree.folders)
            yield tree

    confine.sandbox_cgroup.enter = spy
    try:
        _shell(registry, ctx, "sleep 0.1 & echo done")
    finally:
        confine.sandbox_cgroup.enter = real_enter
    assert created and not any(folder.exists() for folder in created)

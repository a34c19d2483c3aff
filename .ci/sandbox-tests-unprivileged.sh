#!/usr/bin/env bash
# The sandbox tests a second time under an unprivileged account. CI runs as root, and root and a
# user get different things from bubblewrap and the kernel (capabilities, RLIMIT_NPROC, who may
# read what): the attack table must hold for both.
set -euo pipefail
cd "$(dirname "$0")/.."
user=hitrate-ci
id "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$user"
home=$(getent passwd "$user" | cut -d: -f6)
# The account needs to reach the interpreter the virtualenv points to (pyenv puts it under /root)
# and the checkout: search (x) permission on each folder above them that lacks it, nothing more.
for target in "$(readlink -f .venv/bin/python)" "$PWD/.venv/bin/python"; do
  dir=$(dirname "$target")
  while [ "$dir" != "/" ]; do
    [ "$(( 0$(stat -c %a "$dir") & 1 ))" -eq 1 ] || chmod o+x "$dir"
    dir=$(dirname "$dir")
  done
done
runuser -u "$user" -- env -i HOME="$home" USER="$user" LANG=C.UTF-8 PATH=/usr/local/bin:/usr/bin:/bin \
  PYTHONDONTWRITEBYTECODE=1 .venv/bin/python -m pytest -q -p no:cacheprovider \
  tests/security/test_root_escape.py tests/security/test_shell_confinement.py \
  tests/security/test_credential_paths.py tests/security/test_planted_programs.py \
  tests/security/test_grading_attacks.py tests/security/test_grading_verdict.py \
  tests/security/test_sandbox_limits.py tests/tools/test_tools_shell.py "$@"

"""The adversarial tester's findings of 2026-12-07 (/work/lanes/attack/REPORT.md) that lane harden-b fixed, each
reproduced through the command a user runs: a secret passed as a document, a full disk on stdout, a home directory
the user did not make, credentials in an endpoint URL, and daemons' log lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.inputs.inputs_support import ROOT, in_process

JOB = ROOT / "examples" / "jobs" / "train-8.yaml"
# A GitHub personal access token's shape (ghp_ and 36 characters):
# https://github.blog/engineering/platform-security/behind-githubs-new-authentication-token-formats/
TOKEN = "ghp_SUPERSECRETabcdefghijklmnopqrstuvwxyz"


# --- finding 8: a token file passed as a document ---------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["place", "{doc}"],
        ["place", str(JOB), "--fleet", "{doc}"],
        ["probe", "run", "-i", "{doc}"],
        ["jobs", "--clusters", "{doc}"],
        ["multikueue", "dispatch", "--once", "--config", "{doc}", "--context", "c"],
    ],
    ids=["job", "fleet", "inventory", "clusters", "dispatcher-config"],
)
def test_a_token_passed_as_a_document_is_named_by_type_and_size_never_by_its_content(
    tmp_path: Path, args: list[str]
) -> None:
    doc = tmp_path / "ghtoken"
    doc.write_text(TOKEN + "\n", encoding="utf-8")
    run = in_process([a.replace("{doc}", str(doc)) for a in args], home=tmp_path / "home")
    assert run.one_line_error, (run.code, run.stderr)
    assert f"expected a mapping, got a string of {len(TOKEN)} characters" in run.stderr
    assert "SUPERSECRET" not in run.stderr + run.stdout

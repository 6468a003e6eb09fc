"""Destructive commands in advice: recognised in several spellings, so that a step that would delete data or
resources is flagged `destructive`, shown with a warning and never served as a verified step.

Framework-free. The text is normalised first (``normalise_model_text``: NFKC, so full-width letters and
look-alike hyphens fold to ASCII, invisible characters removed), lower-cased, with quotes and backslashes
dropped and whitespace runs made one space, so ``RM  -Rf``, ``rm -r -f``, ``rm --recursive --force``,
``sudo rm -fr`` and ``r\\m -rf`` are one command. Each pattern has a name; ``destructive_commands``
returns the names found.
"""

from __future__ import annotations

import re
from typing import Any

from diagnosis.model_text import normalise_model_text

_W = r"(?:^|[\s;&|(`$'\"])"  # a command starts a line or follows a separator
_F = r"(?:\s+-[\w-]+(?:[= ]\S+)?)*"  # any flags in between

# A table, one (code, regex) row per dangerous command: its rows are alike in shape by design.
PATTERNS: tuple[tuple[str, str], ...] = (
    # shells
    ("shell.rm_recursive", _W + r"(?:sudo\s+)?rm\s+(?:-[a-z]*r[a-z]*|--recursive|-[a-z]*\s+-[a-z]*r[a-z]*)\b"),
    ("shell.rm_root", _W + r"(?:sudo\s+)?rm\s+(?:-\S+\s+)*(?:/|/\*|~|\*)(?:\s|$)"),
    ("shell.mkfs", _W + r"(?:sudo\s+)?mkfs(?:\.\w+)?\s"),
    ("shell.dd_device", _W + r"(?:sudo\s+)?dd\s+.*\bof=/dev/"),
    ("shell.redirect_device", r">\s*/dev/(?:sd|nvme|xvd|vd|hd)[a-z0-9]*"),
    ("shell.fork_bomb", r":\s*\(\s*\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:"),
    ("shell.chmod_root", _W + r"(?:sudo\s+)?chmod\s+(?:-\S+\s+)*(?:-r\s+)?[0-7]*777\s+/(?:\s|$)"),
    ("shell.kill_all", _W + r"(?:sudo\s+)?(?:kill\s+-9\s+-1|killall5?\s|pkill\s+-9\s)"),
    ("shell.shutdown", _W + r"(?:sudo\s+)?(?:shutdown\s+(?:-\w+\s+)*(?:now|\+?\d+)\b|init\s+0\b|poweroff\b)"),
    ("shell.find_delete", _W + r"find\s+.*\s-delete\b"),
    ("shell.truncate_file", _W + r"truncate\s+-s\s*0\s"),
    # a download piped into a shell
    ("shell.pipe_download", r"\b(?:curl|wget|iwr|invoke-webrequest|fetch)\b[^|\n]*\|\s*(?:sudo\s+)?(?:ba|z|k|da|fi)?sh\b"),
    ("shell.pipe_download_interpreter", r"\b(?:curl|wget)\b[^|\n]*\|\s*(?:sudo\s+)?(?:python3?|perl|ruby|node)\b"),
    ("shell.exec_download", r"\b(?:ba|z)?sh\s+(?:-c\s+)?<?\s*\(\s*(?:curl|wget)\b|\$\(\s*(?:curl|wget)\b|\biex\s*\(?\s*\(?\s*(?:iwr|invoke-webrequest|new-object\s+net\.webclient)"),
    # SQL
    ("sql.drop", r"\bdrop\s+(?:database|schema|table|index|view|user|role|keyspace|collection)\b"),
    ("sql.truncate", r"\btruncate\s+table\s+[\w.]+"),
    ("sql.delete_all", r"\bdelete\s+from\s+[\w.]+\s*(?:;|$)"),
    ("sql.alter_drop", r"\balter\s+table\s+\S+\s+drop\b"),
    ("nosql.flush", r"\b(?:flushall|flushdb|dropdatabase\s*\(|db\.dropdatabase|\.drop\s*\(\s*\))"),
    # Kubernetes, Helm, Terraform, containers
    ("kubectl.delete", r"\bkubectl\b" + _F + r"\s+delete\b"),
    ("kubectl.drain", r"\bkubectl\b" + _F + r"\s+drain\b"),
    ("kubectl.scale_zero", r"\bkubectl\b" + _F + r"\s+scale\b.*--replicas[= ]0\b"),
    ("kubectl.replace_force", r"\bkubectl\b" + _F + r"\s+(?:replace|apply)\b.*--force\b"),
    ("helm.uninstall", r"\bhelm\b" + _F + r"\s+(?:uninstall|delete|del|un)\b"),
    ("terraform.destroy", r"\b(?:terraform|tofu|terragrunt)\b" + _F + r"\s+(?:destroy\b|apply\b.*-destroy\b|state\s+rm\b)"),
    ("terraform.auto_approve", r"\b(?:terraform|tofu|terragrunt)\b" + _F + r"\s+apply\b.*-auto-approve\b"),
    ("docker.prune", r"\b(?:docker|podman)\b" + _F + r"\s+(?:system|volume|image|container)\s+prune\b"),
    ("docker.rm_volume", r"\b(?:docker|podman)\b" + _F + r"\s+(?:volume\s+rm|rm\s+-[a-z]*v)\b"),
    # cloud CLIs
    ("aws.delete", r"\baws\s+\S+\s+(?:delete|terminate|remove|deregister)-[\w-]+"),
    ("aws.s3_remove", r"\baws\s+s3\s+(?:rm|rb)\b|\baws\s+s3\s+sync\b.*--delete\b"),
    ("gcloud.delete", r"\bgcloud\b(?:\s+[\w-]+)+\s+delete\b"),
    ("gsutil.remove", r"\bgsutil\b" + _F + r"\s+(?:rm|rb)\b"),
    ("az.delete", r"\baz\b(?:\s+[\w-]+)+\s+(?:delete|purge)\b"),
    # version control
    ("git.force_push", r"\bgit\b" + _F + r"\s+push\b.*(?:\s--force\b|\s--force-with-lease\b|\s-f\b|\s-[a-z]*f[a-z]*\b|\s\+\S+)"),
    ("git.reset_hard", r"\bgit\b" + _F + r"\s+reset\b.*--hard\b"),
    ("git.clean", r"\bgit\b" + _F + r"\s+clean\b.*\s-[a-z]*[fdx][a-z]*\b"),
)
_COMPILED = tuple((name, re.compile(pattern)) for name, pattern in PATTERNS)
_QUOTES = re.compile(r"[\"'`\\]")


def command_text(value: Any) -> str:
    """The text as a shell would read it: normalised, lower-case, no quotes or backslashes, one space."""
    text = normalise_model_text(str(value if value is not None else "")).lower()
    return " ".join(_QUOTES.sub("", text).split())


def destructive_commands(value: Any) -> list[str]:
    """The names of the destructive command patterns found in `value` (empty when there is none)."""
    text = command_text(value)
    return [name for name, pattern in _COMPILED if pattern.search(text)]


def is_destructive(value: Any) -> bool:
    return bool(destructive_commands(value))

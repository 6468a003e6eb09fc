"""When the cause is a caller's own change: a server that refuses the credentials one caller just rotated, or
a quiet dependency that one caller, just changed, began waiting on. The server looks at fault from the caller's
side; the change before the caller's onset is what its evidence leads to.
"""

from __future__ import annotations

from typing import Mapping

from diagnosis.localisation.kinds import change_kind
from diagnosis.localisation.ranking import TOLERANCE_S, Candidate
from diagnosis.localisation.signals import Signal


def rotated_credentials(top: Candidate, candidates: Mapping[str, Candidate], context: list[Signal]) -> Candidate | None:
    """The one caller whose credentials changed shortly before it failed, when the top is a server that
    refuses credentials and did not change itself: the credentials it refuses are the ones that changed."""
    if top.kind != "change.secret":
        return None
    changed = changed_caller(top, candidates, context)
    if len(changed) != 1:
        return None
    caller = candidates[changed[0]]
    secret = any(c.source == "change" and c.entity == caller.service and c.onset is not None and caller.onset is not None
                 and caller.onset - 900 <= c.onset <= caller.onset + TOLERANCE_S
                 and change_kind(c.kind, str(c.detail.get("what", ""))) == "change.secret" for c in context)
    return caller if secret else None


def changed_waiter(top: Candidate, candidates: Mapping[str, Candidate], context: list[Signal]) -> Candidate | None:
    """The one caller that changed just before it began waiting on a quiet dependency: the dependency shows nothing
    of its own, so the change (a shorter deadline, a new call) is what its callers' waits come from."""
    changed = changed_caller(top, candidates, context)
    caller = candidates[changed[0]] if len(changed) == 1 else None
    return caller if caller is not None and (caller.kind or "").startswith("change.") else None


def reroot(ranking: list[Candidate], server: Candidate, caller: Candidate) -> None:
    """The caller becomes the root and the server one of what it explains, first in the ranking."""
    caller.explains = [server.service] + [s for s in server.explains if s != caller.service]
    server.explains, server.explained_by, caller.explained_by = [], caller.service, None
    ranking.remove(caller)
    ranking.insert(0, caller)


def changed_caller(top: Candidate, candidates: Mapping[str, Candidate], context: list[Signal]) -> list[str]:
    """Callers the top explains that changed shortly before their own onset while the top did not change and
    shows no deviation of its own beyond what it logged: a server refusing a client's new credentials or new
    requests looks like a server fault from the client's side. Either may be the cause."""
    if any(c.source == "change" and c.entity == top.service for c in context):
        return []
    if any(s.source in ("metric", "kube") for s in top.faults):
        return []
    out = []
    for name in top.explains:
        caller = candidates.get(name)
        if caller is None or caller.onset is None:
            continue
        if any(c.source == "change" and c.entity == name and c.onset is not None
               and caller.onset - 900 <= c.onset <= caller.onset + TOLERANCE_S for c in context):
            out.append(name)
    return out

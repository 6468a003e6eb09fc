"""Loading Markdown runbooks into knowledge documents and chunks."""

from __future__ import annotations

import hashlib
from pathlib import Path

from django.db import transaction

from diagnosis.models import KnowledgeChunk, KnowledgeDocument
from diagnosis.redaction import redact_text
from diagnosis.tools.knowledge_index import chunk_markdown


@transaction.atomic
def knowledge_load_folder(*, folder: Path, prefix: str = "") -> dict:
    """Upsert every *.md under `folder`; unchanged files are skipped. Returns counts."""
    counts = {"documents": 0, "chunks": 0, "unchanged": 0}
    for path in sorted(Path(folder).rglob("*.md")):
        raw = path.read_text(encoding="utf-8")
        rel = f"{prefix}{path.relative_to(folder).as_posix()}"
        digest = hashlib.sha256(raw.encode()).hexdigest()
        text = redact_text(raw)  # a credential pasted into a runbook is never stored (F-37)
        doc = KnowledgeDocument.objects.filter(path=rel).first()
        if doc and doc.sha256 == digest:
            counts["unchanged"] += 1
            continue
        chunks = chunk_markdown(rel, text)
        title = chunks[0].title if chunks else path.stem
        if doc is None:
            doc = KnowledgeDocument.objects.create(path=rel, title=title[:255], content=text, sha256=digest)
        else:
            KnowledgeDocument.objects.filter(pk=doc.pk).update(title=title[:255], content=text, sha256=digest)
            doc.chunks.all().delete()
        KnowledgeChunk.objects.bulk_create(
            KnowledgeChunk(document=doc, chunk_id=c.chunk_id[:128], ordinal=i, heading=c.title[:255], content=c.content)
            for i, c in enumerate(chunks)
        )
        counts["documents"] += 1
        counts["chunks"] += len(chunks)
    return counts

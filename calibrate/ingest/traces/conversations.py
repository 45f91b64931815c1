"""Conversations through the receiver: a sessions token's traces settle as whole conversations (staging.py's settling).

A receiver token made with `calibrate traces token --sessions` turns the traces that share a
session id into one sample (importer.import_decoded, `sessions`). The receiver stages traces one
by one and settles a trace once it is quiet; `whole_conversations` widens or narrows a settling
batch so that a conversation settles whole, when every one of its staged traces is quiet
(docs/production.md, "Conversations"). A turn that arrives after its conversation settled is a
late turn: the import counts it and keeps it as a sample of its own.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable

from sqlalchemy import false, select, update
from sqlmodel import Session, col

from calibrate.ingest.bulk import in_parts
from calibrate.ingest.traces.decode import Span
from calibrate.ingest.traces.trajectory import session_of
from calibrate.models import IngestToken, StagedSpan, StagedTrace

log = logging.getLogger("calibrate.traces")


def whole_conversations(session: Session, owners: dict[tuple[int, str], int], tokens: dict[int, IngestToken], *,
                        now: float, settle_s: float, read_span: Callable[[str, str, str], Span]) -> dict[tuple[int, str], int]:
    """Return the batch's traces with each conversation of a sessions token whole: a conversation settles when all its
    staged traces are quiet (its newest span `settle_s` old), then with every one of them, in or out of the batch.

    A conversation with a trace still arriving waits: its ready traces are left staged, their time moved to its newest
    trace's, so the ready query takes them again when the whole conversation is quiet (and they hold no other trace
    back meanwhile). The conversation of a trace is read from its staged root span (`session.id`,
    `gen_ai.conversation.id`; `read_span`: staging.span_of): this reads the root spans of the dataset's staged traces
    of sessions tokens.
    """
    conversation_datasets = sorted({ds for (ds, _), token_id in owners.items() if tokens[token_id].sessions})
    out = dict(owners)
    for ds in conversation_datasets:
        staged_rows = session.execute(
            select(StagedTrace.trace_id, StagedTrace.token_id, StagedTrace.last_received_at, StagedSpan.span_id,
                   StagedSpan.span)
            .join(StagedSpan, (StagedSpan.dataset_id == StagedTrace.dataset_id) & (StagedSpan.trace_id == StagedTrace.trace_id)
                  & col(StagedSpan.is_root))
            .join(IngestToken, IngestToken.id == StagedTrace.token_id)
            .where(StagedTrace.dataset_id == ds, col(StagedTrace.quarantined) == false(), col(IngestToken.sessions))).all()
        members: dict[str, list[tuple[str, int, float]]] = defaultdict(list)
        for trace_id, token_id, received, span_id, text in staged_rows:
            try:
                root = read_span(trace_id, span_id, text)
            except (ValueError, KeyError, TypeError):
                continue  # settling quarantines it with its reason
            conversation = session_of([root], root)
            if conversation is not None:
                members[conversation].append((trace_id, token_id, received))
        for conversation, traces in members.items():
            if not any((ds, trace_id) in owners for trace_id, _, _ in traces):
                continue
            newest = max(received for _, _, received in traces)
            if newest <= now - settle_s:
                out.update({(ds, trace_id): token_id for trace_id, token_id, _ in traces})
                continue
            waiting = [trace_id for trace_id, _, _ in traces if (ds, trace_id) in owners]
            for trace_id in waiting:
                out.pop((ds, trace_id), None)
            for chunk in in_parts(waiting):
                session.execute(update(StagedTrace).where(StagedTrace.dataset_id == ds, col(StagedTrace.trace_id).in_(chunk))
                                .values(last_received_at=newest))
            log.debug("conversation %s of dataset %d waits for its newest trace", conversation, ds)
    return out

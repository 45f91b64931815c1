"""Annotation: the queue, the item an expert labels, labels with history and undo, blind rules,
adjudication, guidelines and the team.

Every function takes a SQLModel `Session` and never commits (the caller owns the
transaction) and never imports Flask. Modules:

- `queue`       next item for a user (own pending first, then open slots), skip, flag, submit,
                progress per annotator and per dataset
- `items`       the item view: targets, widgets and keys per task, my labels, completeness
- `labels`      save a label (upsert + LabelRevision), undo the last one, a label's history
- `review`      blind rules: what a user may see of other people's labels and of verdicts
- `adjudication` disagreements between annotators, and the adjudicated (gold) label
- `guidelines`  versioned guidelines per task, rubric levels, re-queueing outdated items
- `team`        accounts and work assignment for the admin page

Rules and the reasons for them: docs/annotation.md.
"""

from __future__ import annotations

from calibrate.errors import AnnotationError, NotFound

__all__ = ["AnnotationError", "NotFound"]

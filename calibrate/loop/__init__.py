"""The engineer's loop: the dashboard, disagreements, triage, few-shots, the frozen test split and "what next" (docs/loop.md)."""

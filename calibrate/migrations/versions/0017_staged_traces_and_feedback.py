"""Staged traces and staged feedback: settling costs its batch, and feedback arrives through the receiver (issue 23).

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02

`stagedtrace`: one row per staged trace (owner token, has_root, newest span's time, span
count), kept up to date when spans are staged; the settler's ready query and the rootless
drop read it through the index (has_root, last_received_at, trace_id) instead of grouping every staged
span. Filled here from the spans already staged. `stagedfeedback`: feedback received by
`POST /v1/feedback` for a trace that is not a sample yet, unique by (dataset, trace id).
`ingesttoken` gains three counters: feedback_received, feedback_late, feedback_dropped.
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0017'
down_revision = '0016'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('stagedtrace',
    sa.Column('trace_id', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
    sa.Column('token_id', sa.Integer(), nullable=False),
    sa.Column('has_root', sa.Boolean(), nullable=False),
    sa.Column('last_received_at', sa.Float(), nullable=False),
    sa.Column('n_spans', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['token_id'], ['ingesttoken.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('trace_id')
    )
    with op.batch_alter_table('stagedtrace', schema=None) as batch_op:
        batch_op.create_index('ix_stagedtrace_ready', ['has_root', 'last_received_at', 'trace_id'], unique=False)

    op.create_table('stagedfeedback',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('dataset_id', sa.Integer(), nullable=False),
    sa.Column('token_id', sa.Integer(), nullable=False),
    sa.Column('trace_id', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
    sa.Column('value', sa.Integer(), nullable=False),
    sa.Column('received_at', sa.Float(), nullable=False),
    sa.ForeignKeyConstraint(['dataset_id'], ['dataset.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['token_id'], ['ingesttoken.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('dataset_id', 'trace_id', name='uq_stagedfeedback_trace')
    )
    with op.batch_alter_table('stagedfeedback', schema=None) as batch_op:
        batch_op.create_index('ix_stagedfeedback_received', ['received_at'], unique=False)

    with op.batch_alter_table('ingesttoken', schema=None) as batch_op:
        for name in ('feedback_received', 'feedback_late', 'feedback_dropped'):
            batch_op.add_column(sa.Column(name, sa.Integer(), nullable=False, server_default='0'))

    # The spans staged before this revision: one row per trace, owned by the token of its first root span
    # (else of its first span), as settling decided it before.
    op.execute("""
        INSERT INTO stagedtrace (trace_id, token_id, has_root, last_received_at, n_spans)
        SELECT s.trace_id,
               coalesce((SELECT r.token_id FROM stagedspan r WHERE r.trace_id = s.trace_id AND r.is_root
                         ORDER BY r.id LIMIT 1),
                        (SELECT f.token_id FROM stagedspan f WHERE f.trace_id = s.trace_id ORDER BY f.id LIMIT 1)),
               max(CASE WHEN s.is_root THEN 1 ELSE 0 END) = 1, max(s.received_at), count(*)
        FROM stagedspan s GROUP BY s.trace_id
    """)


def downgrade() -> None:
    with op.batch_alter_table('ingesttoken', schema=None) as batch_op:
        for name in ('feedback_dropped', 'feedback_late', 'feedback_received'):
            batch_op.drop_column(name)
    with op.batch_alter_table('stagedfeedback', schema=None) as batch_op:
        batch_op.drop_index('ix_stagedfeedback_received')
    op.drop_table('stagedfeedback')
    with op.batch_alter_table('stagedtrace', schema=None) as batch_op:
        batch_op.drop_index('ix_stagedtrace_ready')
    op.drop_table('stagedtrace')

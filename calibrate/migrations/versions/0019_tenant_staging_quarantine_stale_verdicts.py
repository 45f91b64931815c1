"""Staging keyed by (dataset, trace id), quarantined traces, stale verdicts kept aside (issue 30).

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-09

- `stagedspan` gains `dataset_id` (the dataset of the token that sent the span, filled here from
  the token) and is unique by (dataset_id, trace_id, span_id): one tenant's span never joins
  another tenant's trace of the same id.
- `stagedtrace` is keyed by (dataset_id, trace_id) and gains `quarantined` and
  `quarantine_reason` (a trace settling could not map). It is rebuilt here from the staged spans,
  one row per (dataset, trace), owned by the token of its first root span (else of its first span),
  as 0017 filled it.
- `staleverdict`: sample-level verdicts moved out of `verdict` when the content they judged changed.
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0019'
down_revision = '0018'
branch_labels = None
depends_on = None

def upgrade() -> None:
    with op.batch_alter_table('stagedspan', schema=None) as batch_op:
        batch_op.add_column(sa.Column('dataset_id', sa.Integer(), nullable=True))
    op.execute("UPDATE stagedspan SET dataset_id = (SELECT t.dataset_id FROM ingesttoken t WHERE t.id = stagedspan.token_id)")
    with op.batch_alter_table('stagedspan', schema=None) as batch_op:
        batch_op.alter_column('dataset_id', existing_type=sa.Integer(), nullable=False)
        batch_op.create_foreign_key('fk_stagedspan_dataset_id_dataset', 'dataset', ['dataset_id'], ['id'], ondelete='CASCADE')
        batch_op.drop_constraint('uq_stagedspan_trace_span', type_='unique')
        batch_op.create_unique_constraint('uq_stagedspan_dataset_trace_span', ['dataset_id', 'trace_id', 'span_id'])

    with op.batch_alter_table('stagedtrace', schema=None) as batch_op:
        batch_op.drop_index('ix_stagedtrace_ready')
    op.drop_table('stagedtrace')
    op.create_table('stagedtrace',
    sa.Column('dataset_id', sa.Integer(), nullable=False),
    sa.Column('trace_id', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
    sa.Column('token_id', sa.Integer(), nullable=False),
    sa.Column('has_root', sa.Boolean(), nullable=False),
    sa.Column('last_received_at', sa.Float(), nullable=False),
    sa.Column('n_spans', sa.Integer(), nullable=False),
    sa.Column('quarantined', sa.Boolean(), nullable=False, server_default=sa.false()),
    sa.Column('quarantine_reason', sa.Text(), nullable=False, server_default=''),
    sa.ForeignKeyConstraint(['dataset_id'], ['dataset.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['token_id'], ['ingesttoken.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('dataset_id', 'trace_id')
    )
    with op.batch_alter_table('stagedtrace', schema=None) as batch_op:
        batch_op.create_index('ix_stagedtrace_ready', ['has_root', 'quarantined', 'last_received_at', 'dataset_id', 'trace_id'],
                              unique=False)
    op.execute("""
        INSERT INTO stagedtrace (dataset_id, trace_id, token_id, has_root, last_received_at, n_spans)
        SELECT s.dataset_id, s.trace_id,
               coalesce((SELECT r.token_id FROM stagedspan r WHERE r.dataset_id = s.dataset_id AND r.trace_id = s.trace_id
                         AND r.is_root ORDER BY r.id LIMIT 1),
                        (SELECT f.token_id FROM stagedspan f WHERE f.dataset_id = s.dataset_id AND f.trace_id = s.trace_id
                         ORDER BY f.id LIMIT 1)),
               max(CASE WHEN s.is_root THEN 1 ELSE 0 END) = 1, max(s.received_at), count(*)
        FROM stagedspan s GROUP BY s.dataset_id, s.trace_id
    """)

    op.create_table('staleverdict',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('verdict_id', sa.Integer(), nullable=False),
    sa.Column('judge_id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=True),
    sa.Column('task_id', sa.Integer(), nullable=False),
    sa.Column('sample_id', sa.Integer(), nullable=False),
    sa.Column('target_key', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('order', sa.JSON(), nullable=True),
    sa.Column('order_key', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('sample_index', sa.Integer(), nullable=False),
    sa.Column('value', sa.Text(), nullable=True),
    sa.Column('status', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('reason', sa.Text(), nullable=False),
    sa.Column('raw', sa.Text(), nullable=False),
    sa.Column('error', sa.Text(), nullable=False),
    sa.Column('latency_ms', sa.Float(), nullable=True),
    sa.Column('input_tokens', sa.Integer(), nullable=True),
    sa.Column('output_tokens', sa.Integer(), nullable=True),
    sa.Column('cached', sa.Boolean(), nullable=False),
    sa.Column('source', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('stale_at', sa.DateTime(), nullable=False),
    sa.Column('stale_reason', sqlmodel.sql.sqltypes.AutoString(length=500), nullable=False),
    sa.ForeignKeyConstraint(['sample_id'], ['sample.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('staleverdict', schema=None) as batch_op:
        batch_op.create_index('ix_staleverdict_sample', ['sample_id'], unique=False)


def downgrade() -> None:
    # Stale verdicts are history no figure reads: they go. Staged traces of two datasets with one id become one again.
    with op.batch_alter_table('staleverdict', schema=None) as batch_op:
        batch_op.drop_index('ix_staleverdict_sample')
    op.drop_table('staleverdict')

    with op.batch_alter_table('stagedtrace', schema=None) as batch_op:
        batch_op.drop_index('ix_stagedtrace_ready')
    op.drop_table('stagedtrace')
    # The same trace and span staged for two datasets: the first staged stays.
    op.execute("DELETE FROM stagedspan WHERE id NOT IN (SELECT min(id) FROM stagedspan GROUP BY trace_id, span_id)")
    with op.batch_alter_table('stagedspan', schema=None) as batch_op:
        batch_op.drop_constraint('uq_stagedspan_dataset_trace_span', type_='unique')
        batch_op.drop_constraint('fk_stagedspan_dataset_id_dataset', type_='foreignkey')
        batch_op.create_unique_constraint('uq_stagedspan_trace_span', ['trace_id', 'span_id'])
        batch_op.drop_column('dataset_id')
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
    op.execute("""
        INSERT INTO stagedtrace (trace_id, token_id, has_root, last_received_at, n_spans)
        SELECT s.trace_id,
               coalesce((SELECT r.token_id FROM stagedspan r WHERE r.trace_id = s.trace_id AND r.is_root
                         ORDER BY r.id LIMIT 1),
                        (SELECT f.token_id FROM stagedspan f WHERE f.trace_id = s.trace_id ORDER BY f.id LIMIT 1)),
               max(CASE WHEN s.is_root THEN 1 ELSE 0 END) = 1, max(s.received_at), count(*)
        FROM stagedspan s GROUP BY s.trace_id
    """)

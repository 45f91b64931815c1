"""The OTLP/HTTP receiver: ingest tokens and staged spans (issue 23).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02

`ingesttoken`: a bearer token of `POST /v1/traces`, stored as its sha256, bound to one dataset
and its sampling (rate, salt), with the production source's counters the dataset page shows.
`stagedspan`: spans received and not yet settled into a trace, unique by (trace_id, span_id)
so a retried export changes nothing (calibrate/ingest/traces/staging.py). New tables only.
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('ingesttoken',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('token_hash', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('dataset_id', sa.Integer(), nullable=False),
    sa.Column('rate', sa.Float(), nullable=False),
    sa.Column('salt', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('last_used_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    sa.Column('revoked_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    sa.Column('spans_received', sa.Integer(), nullable=False),
    sa.Column('spans_repeated', sa.Integer(), nullable=False),
    sa.Column('spans_rejected', sa.Integer(), nullable=False),
    sa.Column('traces_settled', sa.Integer(), nullable=False),
    sa.Column('traces_sampled', sa.Integer(), nullable=False),
    sa.Column('traces_sampled_down', sa.Integer(), nullable=False),
    sa.Column('traces_dropped', sa.Integer(), nullable=False),
    sa.Column('spans_dropped', sa.Integer(), nullable=False),
    sa.Column('skipped', sa.JSON(), nullable=False),
    sa.Column('last_received_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    sa.ForeignKeyConstraint(['dataset_id'], ['dataset.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('ingesttoken', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_ingesttoken_token_hash'), ['token_hash'], unique=True)

    op.create_table('stagedspan',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('token_id', sa.Integer(), nullable=False),
    sa.Column('trace_id', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
    sa.Column('span_id', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
    sa.Column('is_root', sa.Boolean(), nullable=False),
    sa.Column('received_at', sa.Float(), nullable=False),
    sa.Column('span', sa.Text(), nullable=False),
    sa.ForeignKeyConstraint(['token_id'], ['ingesttoken.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('trace_id', 'span_id', name='uq_stagedspan_trace_span')
    )
    with op.batch_alter_table('stagedspan', schema=None) as batch_op:
        batch_op.create_index('ix_stagedspan_received', ['received_at'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('stagedspan', schema=None) as batch_op:
        batch_op.drop_index('ix_stagedspan_received')
    op.drop_table('stagedspan')
    with op.batch_alter_table('ingesttoken', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_ingesttoken_token_hash'))
    op.drop_table('ingesttoken')

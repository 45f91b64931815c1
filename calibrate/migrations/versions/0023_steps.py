"""Agent trajectories (issue 33): a sample's steps, and step targets for labels, verdicts and few-shots.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-03

A new table `step` (one row per step of a sample's trajectory, in start order: its kind, name,
input, output, status, start, duration, tool name/arguments/result, conversation turn; retired,
never deleted, by an --update, as claims and contexts are), indexed by (sample_id, index). A label,
verdict or few-shot on a step names it by `step_id` beside its target key "step:ID"; so do the
staged lines of an import batch. `step_id` has no foreign key: on SQLite adding one would copy
the label and verdict tables. Nothing is rewritten: existing rows get NULL. An ingest token gains
`sessions` (its traces sharing a session id settle as one sample, a conversation); existing tokens: false.
A task gains `error_types` (its error taxonomy: step_correctness's wrong_tool, …), a label or a verdict (and their
staged import lines) `error_type`, one of them; existing rows: NULL.
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0023'
down_revision = '0022'
branch_labels = None
depends_on = None

_STEP_TARGETS = ('label', 'verdict', 'fewshot', 'stagedlabel', 'stagedverdict')
_ERROR_TYPED = ('label', 'verdict', 'stagedlabel', 'stagedverdict')


def upgrade() -> None:
    op.create_table('step',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('sample_id', sa.Integer(), nullable=False),
    sa.Column('index', sa.Integer(), nullable=False),
    sa.Column('parent', sa.Integer(), nullable=True),
    sa.Column('external_id', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('kind', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('name', sqlmodel.sql.sqltypes.AutoString(length=500), nullable=False),
    sa.Column('input', sa.Text(), nullable=True),
    sa.Column('output', sa.Text(), nullable=True),
    sa.Column('status', sqlmodel.sql.sqltypes.AutoString(length=10), nullable=False),
    sa.Column('started_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    sa.Column('duration_ms', sa.Float(), nullable=True),
    sa.Column('tool_name', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True),
    sa.Column('tool_arguments', sa.JSON(), nullable=True),
    sa.Column('tool_result', sa.JSON(), nullable=True),
    sa.Column('turn', sa.Integer(), nullable=True),
    sa.Column('active', sa.Boolean(), nullable=False),
    sa.ForeignKeyConstraint(['sample_id'], ['sample.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('step', schema=None) as batch_op:
        batch_op.create_index('ix_step_sample_index', ['sample_id', 'index'], unique=False)
    for table in _STEP_TARGETS:  # ADD COLUMN, nullable, no foreign key: no table copy on SQLite
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column('step_id', sa.Integer(), nullable=True))
    with op.batch_alter_table('ingesttoken', schema=None) as batch_op:
        batch_op.add_column(sa.Column('sessions', sa.Boolean(), nullable=False, server_default='0'))  # text: no table copy
    with op.batch_alter_table('task', schema=None) as batch_op:
        batch_op.add_column(sa.Column('error_types', sa.JSON(), nullable=True))
    for table in _ERROR_TYPED:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column('error_type', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=True))


def downgrade() -> None:
    for table in _ERROR_TYPED:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column('error_type')
    with op.batch_alter_table('task', schema=None) as batch_op:
        batch_op.drop_column('error_types')
    with op.batch_alter_table('ingesttoken', schema=None) as batch_op:
        batch_op.drop_column('sessions')
    for table in _STEP_TARGETS:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column('step_id')
    with op.batch_alter_table('step', schema=None) as batch_op:
        batch_op.drop_index('ix_step_sample_index')
    op.drop_table('step')

"""Watch leases: the jobs of a watched dataset and which watcher holds each (judges/watch.py).

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02

`calibrate watch` adds a row per pending job (judge, task, target, order), claims rows in small
batches by setting `owner` and `expires` (seconds since the epoch on the database's clock), and
deletes a row in the transaction that stores its verdict. A new table: nothing else changes.
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('watchlease',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('judge_id', sa.Integer(), nullable=False),
    sa.Column('task_id', sa.Integer(), nullable=False),
    sa.Column('dataset_id', sa.Integer(), nullable=False),
    sa.Column('sample_id', sa.Integer(), nullable=False),
    sa.Column('target_key', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('order_key', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('owner', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('expires', sa.Float(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['sample_id'], ['sample.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('judge_id', 'task_id', 'target_key', 'order_key', name='uq_watchlease_job')
    )
    with op.batch_alter_table('watchlease', schema=None) as batch_op:
        batch_op.create_index('ix_watchlease_claim', ['judge_id', 'task_id', 'expires'], unique=False)
        batch_op.create_index('ix_watchlease_owner', ['owner'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('watchlease', schema=None) as batch_op:
        batch_op.drop_index('ix_watchlease_owner')
        batch_op.drop_index('ix_watchlease_claim')
    op.drop_table('watchlease')

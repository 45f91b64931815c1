"""Self-consistency: a verdict's sample index (`calibrate judge run --samples K`).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02

`verdict.sample_index` (0..K-1): the K calls a run makes on one target are K verdicts, and the
unique key becomes (judge, task, target, order_key, sample_index). Every existing verdict is
sample 0, the one "the verdict of a target" means everywhere; the report's `self_consistency`
block reads the others. SQLite copies the verdict table to change its constraint; no verdict is
lost. Downgrading drops the samples other than 0 (the old key holds one per target and order).
"""
from alembic import op
import sqlalchemy as sa


revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('verdict', schema=None) as batch_op:
        batch_op.add_column(sa.Column('sample_index', sa.Integer(), nullable=False, server_default='0'))
        batch_op.drop_constraint('uq_verdict_target_order', type_='unique')
        batch_op.create_unique_constraint('uq_verdict_target_order_sample',
                                          ['judge_id', 'task_id', 'target_key', 'order_key', 'sample_index'])


def downgrade() -> None:
    op.execute("DELETE FROM verdict WHERE sample_index <> 0")
    with op.batch_alter_table('verdict', schema=None) as batch_op:
        batch_op.drop_constraint('uq_verdict_target_order_sample', type_='unique')
        batch_op.create_unique_constraint('uq_verdict_target_order', ['judge_id', 'task_id', 'target_key', 'order_key'])
        batch_op.drop_column('sample_index')

"""Tasks and prompts scoped to datasets.

Revision ID: 0011
Revises: 0010
Create Date: 2027-01-25

`taskdataset` (task_id, dataset_id): a custom task made for some datasets (`calibrate task add
--dataset D`, repeatable); the workbench offers it only on their items and refuses a label on it
elsewhere. `promptdataset` (prompt_id, dataset_id): a prompt made for some datasets (`calibrate
prompt new --dataset D`); other datasets' dashboards and the prompts page filtered by dataset do
not list it, and it runs only on them. A task or prompt without rows is global, as every one was
before this revision: nothing to fill in. Link tables rather than a column, so one task or prompt
can serve several datasets; both rows go with their task, prompt or dataset (ON DELETE CASCADE).
"""
from alembic import op
import sqlalchemy as sa


revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('taskdataset',
    sa.Column('task_id', sa.Integer(), nullable=False),
    sa.Column('dataset_id', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['dataset_id'], ['dataset.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['task_id'], ['task.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('task_id', 'dataset_id')
    )
    with op.batch_alter_table('taskdataset', schema=None) as batch_op:
        batch_op.create_index('ix_taskdataset_dataset', ['dataset_id'], unique=False)

    op.create_table('promptdataset',
    sa.Column('prompt_id', sa.Integer(), nullable=False),
    sa.Column('dataset_id', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['dataset_id'], ['dataset.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['prompt_id'], ['prompt.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('prompt_id', 'dataset_id')
    )
    with op.batch_alter_table('promptdataset', schema=None) as batch_op:
        batch_op.create_index('ix_promptdataset_dataset', ['dataset_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('promptdataset', schema=None) as batch_op:
        batch_op.drop_index('ix_promptdataset_dataset')
    op.drop_table('promptdataset')
    with op.batch_alter_table('taskdataset', schema=None) as batch_op:
        batch_op.drop_index('ix_taskdataset_dataset')
    op.drop_table('taskdataset')

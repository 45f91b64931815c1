"""Optimisations: `calibrate optimise` and the prompt versions it proposes (issue 32).

Revision ID: 0021
Revises: 0019
Create Date: 2026-12-03

A new table `optimisation` (its settings, its progress kept as it goes so that a killed one is
taken up by the same command, its result) and `promptversion.optimisation_id`, the origin of a
version an optimisation proposed (NULL for a version a person saved; SET NULL if the
optimisation's dataset is deleted, the version stays). How many versions were scored on a split
(the looks that `lower_adjusted` is adjusted for) is not stored: it is the number of judges with
verdicts of the task on that split's samples, current or set aside as stale (revision 0019), which
nothing deletes (loop/testsplit.py).
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0021'
down_revision = '0019'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('optimisation',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('dataset_id', sa.Integer(), nullable=False),
    sa.Column('task_id', sa.Integer(), nullable=False),
    sa.Column('key', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('status', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('settings', sa.JSON(), nullable=False),
    sa.Column('state', sa.JSON(), nullable=False),
    sa.Column('result', sa.JSON(), nullable=True),
    sa.Column('error', sa.Text(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=True),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('finished_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    sa.ForeignKeyConstraint(['dataset_id'], ['dataset.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['task_id'], ['task.id'], ),
    sa.ForeignKeyConstraint(['user_id'], ['user.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('optimisation', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_optimisation_dataset_id'), ['dataset_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_optimisation_key'), ['key'], unique=False)

    with op.batch_alter_table('promptversion', schema=None) as batch_op:
        batch_op.add_column(sa.Column('optimisation_id', sa.Integer(), nullable=True))
        batch_op.create_foreign_key('fk_promptversion_optimisation_id', 'optimisation', ['optimisation_id'], ['id'],
                                    ondelete='SET NULL')


def downgrade() -> None:
    with op.batch_alter_table('promptversion', schema=None) as batch_op:
        batch_op.drop_constraint('fk_promptversion_optimisation_id', type_='foreignkey')
        batch_op.drop_column('optimisation_id')
    with op.batch_alter_table('optimisation', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_optimisation_key'))
        batch_op.drop_index(batch_op.f('ix_optimisation_dataset_id'))
    op.drop_table('optimisation')

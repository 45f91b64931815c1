"""Golden sets: named, versioned, hashed lists of a dataset's samples with their gold (calibrate/loop/golden.py).

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02

Three new tables, no change to existing ones: `goldenset` (a name per dataset),
`goldenversion` (an immutable version: its items and their gold at the time as JSON, and the
sha256 of them) and `goldenmember` (a sample's life in the set: `added_in`, `retired_in`,
`anchor_in` as version numbers, and the production trace it came from).
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0016'
down_revision = '0015'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('goldenset',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('dataset_id', sa.Integer(), nullable=False),
    sa.Column('name', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['dataset_id'], ['dataset.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('dataset_id', 'name', name='uq_goldenset_name')
    )
    with op.batch_alter_table('goldenset', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_goldenset_dataset_id'), ['dataset_id'], unique=False)

    op.create_table('goldenversion',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('golden_set_id', sa.Integer(), nullable=False),
    sa.Column('number', sa.Integer(), nullable=False),
    sa.Column('hash', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('items', sa.JSON(), nullable=False),
    sa.Column('params', sa.JSON(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=True),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['golden_set_id'], ['goldenset.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['user_id'], ['user.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('golden_set_id', 'number', name='uq_goldenversion_number')
    )
    with op.batch_alter_table('goldenversion', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_goldenversion_golden_set_id'), ['golden_set_id'], unique=False)

    op.create_table('goldenmember',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('golden_set_id', sa.Integer(), nullable=False),
    sa.Column('sample_id', sa.Integer(), nullable=False),
    sa.Column('added_in', sa.Integer(), nullable=False),
    sa.Column('retired_in', sa.Integer(), nullable=True),
    sa.Column('anchor_in', sa.Integer(), nullable=True),
    sa.Column('source_trace_id', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True),
    sa.ForeignKeyConstraint(['golden_set_id'], ['goldenset.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['sample_id'], ['sample.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('golden_set_id', 'sample_id', name='uq_goldenmember_sample')
    )
    with op.batch_alter_table('goldenmember', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_goldenmember_golden_set_id'), ['golden_set_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('goldenmember', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_goldenmember_golden_set_id'))
    op.drop_table('goldenmember')
    with op.batch_alter_table('goldenversion', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_goldenversion_golden_set_id'))
    op.drop_table('goldenversion')
    with op.batch_alter_table('goldenset', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_goldenset_dataset_id'))
    op.drop_table('goldenset')

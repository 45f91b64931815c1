"""Expert queues that fill themselves: the assignment's stream, the saved queue policy, the audit draws.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02

`assignment.stream` ("triage" | "audit" | NULL) and `assignment.audit_prob` keep the two streams of
`calibrate queue auto` apart in the data: only audit labels, weighted by 1/audit_prob, feed
`calibrate monitor`'s estimates. `queuepolicy` is a dataset's saved policy (one row per dataset);
`auditdraw` records every judged sample's one draw (drawn or passed over) so a sample is never a
candidate twice. Plain ADD COLUMN and CREATE TABLE: nothing existing is copied.
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0015'
down_revision = '0014'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('assignment', sa.Column('stream', sqlmodel.sql.sqltypes.AutoString(length=10), nullable=True))
    op.add_column('assignment', sa.Column('audit_prob', sa.Float(), nullable=True))
    op.create_table(
        'queuepolicy',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('dataset_id', sa.Integer(), nullable=False),
        sa.Column('daily', sa.Integer(), nullable=False),
        sa.Column('assign', sa.JSON(), nullable=False),
        sa.Column('overlap', sa.Integer(), nullable=False),
        sa.Column('overlap_share', sa.Float(), nullable=False),
        sa.Column('audit_share', sa.Float(), nullable=False),
        sa.Column('seed', sa.Integer(), nullable=False),
        sa.Column('updated_by_id', sa.Integer(), nullable=True),
        sa.Column('updated_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(['dataset_id'], ['dataset.id'], ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['updated_by_id'], ['user.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('dataset_id'),
    )
    op.create_table(
        'auditdraw',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('dataset_id', sa.Integer(), nullable=False),
        sa.Column('sample_id', sa.Integer(), nullable=False),
        sa.Column('drawn', sa.Boolean(), nullable=False),
        sa.Column('probability', sa.Float(), nullable=False),
        sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(['dataset_id'], ['dataset.id'], ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['sample_id'], ['sample.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('sample_id', name='uq_auditdraw_sample'),
    )
    op.create_index('ix_auditdraw_dataset', 'auditdraw', ['dataset_id'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_auditdraw_dataset', table_name='auditdraw')
    op.drop_table('auditdraw')
    op.drop_table('queuepolicy')
    op.drop_column('assignment', 'audit_prob')
    op.drop_column('assignment', 'stream')

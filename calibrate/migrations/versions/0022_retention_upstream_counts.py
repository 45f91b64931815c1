"""Production traces without glue (issue 36): the retention setting, and the receiver's upstream and metadata counts.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-08

A new table `retentionpolicy` (one per dataset: purge its production samples older than N days, applied daily by
the traces server's settler; when it last ran and what it removed). `ingesttoken` gains two counters of the
production source: `upstream` (how the sampled traces' upstream sampling probability was read from their
tracestate, {kind: traces}) and `metadata_dropped` (keys of the application's metadata left out). Nothing is
rewritten: existing tokens start at {} and 0.
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0022'
down_revision = '0021'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('retentionpolicy',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('dataset_id', sa.Integer(), nullable=False),
    sa.Column('older_than_days', sa.Integer(), nullable=False),
    sa.Column('updated_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('applied_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    sa.Column('last_result', sa.JSON(), nullable=True),
    sa.ForeignKeyConstraint(['dataset_id'], ['dataset.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('dataset_id')
    )
    with op.batch_alter_table('ingesttoken', schema=None) as batch_op:
        batch_op.add_column(sa.Column('upstream', sa.JSON(), nullable=False, server_default='{}'))
        batch_op.add_column(sa.Column('metadata_dropped', sa.Integer(), nullable=False, server_default='0'))


def downgrade() -> None:
    with op.batch_alter_table('ingesttoken', schema=None) as batch_op:
        batch_op.drop_column('metadata_dropped')
        batch_op.drop_column('upstream')
    op.drop_table('retentionpolicy')

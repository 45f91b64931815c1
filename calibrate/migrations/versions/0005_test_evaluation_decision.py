"""The three-state decision of a look at the test split: decision, rule and threshold (calibration/decision.py).

Nullable columns: looks recorded before this revision keep their `passed` and have no decision.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('testevaluation', schema=None) as batch_op:
        batch_op.add_column(sa.Column('decision', sqlmodel.sql.sqltypes.AutoString(length=10), nullable=True))
        batch_op.add_column(sa.Column('rule', sqlmodel.sql.sqltypes.AutoString(length=10), nullable=True))
        batch_op.add_column(sa.Column('threshold', sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('testevaluation', schema=None) as batch_op:
        batch_op.drop_column('threshold')
        batch_op.drop_column('rule')
        batch_op.drop_column('decision')

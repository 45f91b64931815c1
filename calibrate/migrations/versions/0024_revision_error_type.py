"""A label's revisions keep its error type (issue 33: the workbench chooses the error type of an `incorrect` step).

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-03

`labelrevision.error_type`: the error type the label had before a change (or was created or undone
with), so that an undo restores it with the value and a label's history shows it. A nullable ADD
COLUMN: no table copy; existing revisions get NULL (their labels had none chosen in the workbench).
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0024'
down_revision = '0023'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('labelrevision', schema=None) as batch_op:
        batch_op.add_column(sa.Column('error_type', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('labelrevision', schema=None) as batch_op:
        batch_op.drop_column('error_type')

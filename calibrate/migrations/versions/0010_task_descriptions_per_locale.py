"""A custom task's description per language.

Revision ID: 0010
Revises: 0009
Create Date: 2027-01-20

`task.descriptions`: {locale: description} for the languages other than the default one
(`calibrate task edit NAME --description es:…`); `task.description` stays the default
language's text and what every reader sees when their language has none. A column of its own
rather than a key inside `task.display` ({locale: {label: name}}): a label may be named anything,
so no key there is free to mean "the description". Plain ALTER TABLE ADD COLUMN, as in 0009.
"""
from alembic import op
import sqlalchemy as sa


revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('task', sa.Column('descriptions', sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column('task', 'descriptions')

"""The interface's languages: each user's locale, and each task's label display names per locale.

Revision ID: 0009
Revises: 0008
Create Date: 2027-01-10

`user.locale`: the language the user chose on the Account page ("en", "es"); NULL follows the
browser's Accept-Language. `task.display`: {locale: {stored label: display name}} (labels keep
their stored values; `calibrate task edit --display es:supported=Respaldada`). `task.revision`
counts a task's edits, so the workbench's task cache (keyed on the tasks' state) sees an edit.
The built-in tasks get their Spanish display names. Columns are added with plain ALTER TABLE ADD
COLUMN (no batch copy: copying `user` or `task` on SQLite would drop the table, and with foreign
keys on that cascades).
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None

# The built-in tasks' Spanish display names, as calibrate/tasks.py gives new databases.
BUILTIN_DISPLAY = {
    "claim_support": {"es": {"supported": "Respaldada", "unsupported": "No respaldada",
                             "not_applicable": "No es una afirmación"}},
    "context_relevance": {"es": {"relevant": "Relevante", "not_relevant": "No relevante"}},
}


def upgrade() -> None:
    op.add_column('user', sa.Column('locale', sqlmodel.sql.sqltypes.AutoString(length=10), nullable=True))
    op.add_column('task', sa.Column('display', sa.JSON(), nullable=True))
    op.add_column('task', sa.Column('revision', sa.Integer(), nullable=False, server_default='0'))
    task = sa.table('task', sa.column('name', sa.String), sa.column('display', sa.JSON), sa.column('builtin', sa.Boolean))
    for name, display in BUILTIN_DISPLAY.items():
        op.execute(task.update().where(task.c.name == name, task.c.builtin == sa.true()).values(display=display))  # JSON: PostgreSQL's json column takes no text


def downgrade() -> None:
    op.drop_column('task', 'revision')
    op.drop_column('task', 'display')
    op.drop_column('user', 'locale')

"""claim sets: where a sample's claims come from, LLM extraction, expert claim edits

Sample.claim_source names the method behind a sample's active claims ("segmenter", "import",
"NAME@V" for an extraction, "+edited" once an expert changed one), Claim.origin who made
each claim, and ClaimEdit keeps every split, merge and text edit an expert made in the
workbench (who, when, before and after, which labels it flagged stale). Verdict.value and
FewShot.value become TEXT: an extraction's verdict, and an extraction example, is a claim list.

Existing rows: samples whose claims came with the file (segmenter "given") get "import", the
others "segmenter"; their claims get the same origin. No label is touched.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('claimedit',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('sample_id', sa.Integer(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=False),
    sa.Column('action', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('before', sa.JSON(), nullable=False),
    sa.Column('after', sa.JSON(), nullable=False),
    sa.Column('source_before', sqlmodel.sql.sqltypes.AutoString(length=250), nullable=False),
    sa.Column('source_after', sqlmodel.sql.sqltypes.AutoString(length=250), nullable=False),
    sa.Column('stale_labels', sa.JSON(), nullable=False),
    sa.Column('undone_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['sample_id'], ['sample.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['user_id'], ['user.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('claimedit', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_claimedit_sample_id'), ['sample_id'], unique=False)

    # ADD COLUMN with a server default: no table copy on SQLite. The application always writes
    # the value; the default only fills the rows that exist now.
    with op.batch_alter_table('sample', schema=None) as batch_op:
        batch_op.add_column(sa.Column('claim_source', sqlmodel.sql.sqltypes.AutoString(length=250), nullable=False,
                                      server_default='segmenter'))
    with op.batch_alter_table('claim', schema=None) as batch_op:
        batch_op.add_column(sa.Column('origin', sqlmodel.sql.sqltypes.AutoString(length=250), nullable=False,
                                      server_default='segmenter'))
    op.execute("UPDATE sample SET claim_source = 'import' WHERE segmenter = 'given'")
    op.execute("UPDATE claim SET origin = 'import' WHERE sample_id IN (SELECT id FROM sample WHERE segmenter = 'given')")
    if op.get_bind().dialect.name == "sqlite":
        return  # SQLite does not enforce VARCHAR lengths: no need to copy the verdict table for TEXT
    with op.batch_alter_table('verdict', schema=None) as batch_op:
        batch_op.alter_column('value', existing_type=sqlmodel.sql.sqltypes.AutoString(length=200), type_=sa.Text(),
                              existing_nullable=True)
    with op.batch_alter_table('fewshot', schema=None) as batch_op:
        batch_op.alter_column('value', existing_type=sqlmodel.sql.sqltypes.AutoString(length=200), type_=sa.Text(),
                              existing_nullable=False)


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        with op.batch_alter_table('fewshot', schema=None) as batch_op:
            batch_op.alter_column('value', existing_type=sa.Text(), type_=sqlmodel.sql.sqltypes.AutoString(length=200),
                                  existing_nullable=False)
        with op.batch_alter_table('verdict', schema=None) as batch_op:
            batch_op.alter_column('value', existing_type=sa.Text(), type_=sqlmodel.sql.sqltypes.AutoString(length=200),
                                  existing_nullable=True)
    with op.batch_alter_table('claim', schema=None) as batch_op:
        batch_op.drop_column('origin')
    with op.batch_alter_table('sample', schema=None) as batch_op:
        batch_op.drop_column('claim_source')
    with op.batch_alter_table('claimedit', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_claimedit_sample_id'))
    op.drop_table('claimedit')

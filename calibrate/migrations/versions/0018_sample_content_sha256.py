"""sample.content_sha256: the trace content digest as an indexed column, so settling costs its batch (issue 23).

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-02

The traces import counts "the same content under another trace id" as `duplicate_content`;
it looked for the digest inside every stored sample's metadata JSON
(`json_extract(metadata, '$.content_sha256') IN (…)`), which no index serves, so each settling
transaction read the whole dataset. `sample.content_sha256` holds a copy of
`metadata.content_sha256` when that is a 64-character string (NULL otherwise), with the index
(dataset_id, content_sha256). Filled here from the stored metadata.
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0018'
down_revision = '0017'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('sample', schema=None) as batch_op:
        batch_op.add_column(sa.Column('content_sha256', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True))
        batch_op.create_index('ix_sample_dataset_content_sha256', ['dataset_id', 'content_sha256'], unique=False)

    # The copy the samples import writes (calibrate.ingest.sample_records.content_digest): a string of 64 characters.
    if op.get_bind().dialect.name == 'postgresql':  # `metadata` is JSON (not JSONB) there
        op.execute("""
            UPDATE sample SET content_sha256 = metadata->>'content_sha256'
            WHERE json_typeof(metadata) = 'object' AND json_typeof(metadata->'content_sha256') = 'string'
              AND length(metadata->>'content_sha256') = 64
        """)
    else:
        op.execute("""
            UPDATE sample SET content_sha256 = json_extract(metadata, '$.content_sha256')
            WHERE json_valid(metadata) AND json_type(metadata) = 'object'
              AND json_type(metadata, '$.content_sha256') = 'text'
              AND length(json_extract(metadata, '$.content_sha256')) = 64
        """)


def downgrade() -> None:
    with op.batch_alter_table('sample', schema=None) as batch_op:
        batch_op.drop_index('ix_sample_dataset_content_sha256')
        batch_op.drop_column('content_sha256')

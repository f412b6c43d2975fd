"""Alembic environment of the store: migrations run on the connection the store hands over.

Stores upgrade themselves when opened (:func:`tunewise.stores._sqlalchemy.upgrade`). To write a migration
after changing ``_schema.py``, autogenerate it against a store at the previous head::

    import sqlalchemy
    from alembic import command
    from tunewise.stores import _sqlalchemy
    with sqlalchemy.create_engine("sqlite:///old.db").begin() as connection:
        command.revision(_sqlalchemy.alembic_config(connection), "what changed", autogenerate=True)
"""

from alembic import context

from tunewise.stores._schema import METADATA

context.configure(connection=context.config.attributes["connection"], target_metadata=METADATA,
                  render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()

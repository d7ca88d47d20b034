"""Helpers shared by the python-orders example's service and consumer."""

import re

from sqlalchemy import create_engine

NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def engine_for(dsn: str, pool_size: int = 5):
    """A SQLAlchemy engine on psycopg 3 for a libpq URL such as postgres://u:p@host:5432/db."""
    for scheme in ("postgres://", "postgresql://"):
        if dsn.startswith(scheme):
            dsn = "postgresql+psycopg://" + dsn[len(scheme):]
    return create_engine(dsn, pool_size=pool_size, max_overflow=0)


def table_name(prefix: str, name: str) -> str:
    """The example's table name with the given prefix, refused unless it is a plain identifier."""
    full = prefix + name
    if not NAME.match(full):
        raise ValueError(f"table name {full!r} is not a plain lower-case SQL identifier")
    return full

"""The archive's fixtures: a PostgreSQL cluster of the test session's own, a database a test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.postgres import MISSING, PostgresCluster, PostgresError, have_postgres


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    """initdb in a temporary folder, the server on a free loopback port, for the session."""
    if not have_postgres():
        pytest.skip(MISSING)
    cluster = PostgresCluster()
    try:
        cluster.start()
    except PostgresError as exc:
        cluster.close()
        pytest.fail(str(exc), pytrace=False)
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def archive_db(postgres_cluster: PostgresCluster) -> str:
    """The URL of a new empty database on the session's cluster."""
    return postgres_cluster.create_database("archive")


@pytest.fixture(params=["postgresql", "sqlite"])
def archive_url(request: pytest.FixtureRequest, tmp_path) -> str:
    """A new empty archive of each kind: a database on the session's PostgreSQL cluster, and
    an SQLite file (``sqlite:///`` + an absolute path: four slashes)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'archive.sqlite'}"
    cluster: PostgresCluster = request.getfixturevalue("postgres_cluster")
    return cluster.create_database("archive")

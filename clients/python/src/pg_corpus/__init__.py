"""pg_corpus: the Python client of the pg_corpus PostgreSQL extension.

    from pg_corpus import Client
    client = Client("postgresql://postgres@127.0.0.1:5432/app")
    for hit in client.search("external_precedents", query_vector, "שכירות חידוש", k=5):
        print(hit.rank, hit.locator["case_number"], hit.content[:80])
"""
from .client import UNSET, AsyncClient, Client
from .errors import (BadFilter, BadVector, DatabaseUnavailable, InvalidArgument, MissingScopeFilter, PermissionDenied,
                     PgCorpusError, ReadOnly, UnknownCorpus)
from .types import (CorpusInfo, EvalRun, FilterCheck, HealthRow, Hit, Item, LexicalRefresh, QueryComparison,
                    QueryKey, QueuedItem, RunComparison, SourceFound, Subplan, TuneRun)

__version__ = "0.4.0"
__all__ = [
    "AsyncClient", "BadFilter", "BadVector", "Client", "CorpusInfo", "DatabaseUnavailable", "EvalRun", "FilterCheck",
    "HealthRow", "Hit", "InvalidArgument", "Item", "LexicalRefresh", "MissingScopeFilter", "PermissionDenied",
    "PgCorpusError", "QueryComparison", "QueryKey", "QueuedItem", "ReadOnly", "RunComparison", "SourceFound", "Subplan", "TuneRun", "UNSET",
    "UnknownCorpus",
]

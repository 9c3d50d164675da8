"""Typed rows of the extension's functions."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Hit:
    """One row of ``corpus_hybrid_search``: the fused rank, where the item comes from, and what
    each branch said about it."""

    rank: int
    corpus: str
    source: str
    item_id: str
    parent_id: str
    score: float
    semantic_rank: int | None
    semantic_distance: float | None
    lexical_rank: int | None
    lexical_score: float | None
    content: str
    locator: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    embedding_stale: bool = False
    #: every query and branch that ranked the hit: ``{"query", "branch", "rank", "distance" | "score"}``
    query_ranks: list[dict[str, Any]] = field(default_factory=list)
    #: why the evidence filter admitted the hit (``{"near_vector": …}``, ``{"rare_words": …}``);
    #: None when the filter was off
    evidence: dict[str, Any] | None = None
    #: how the hit came in when not by the search's own lists: ``{"kind": "must_include", …}`` or
    #: ``{"kind": "graph", …}``; None when it did
    origin: dict[str, Any] | None = None
    #: the passage with the query's words marked, when the search asked for snippets
    snippet: str | None = None


@dataclass(frozen=True)
class Subplan:
    """One row of ``corpus_explain``: a subplan's exact SQL and parameters."""

    source: str
    branch: str
    strategy: str
    sql: str
    params: Any
    #: the query the subplan searches for: ``"original"`` or an extra query's label
    query: str = "original"


@dataclass(frozen=True)
class SourceFound:
    """The row of ``corpus_add_source``: what registering a source found. ``items`` (those in
    the corpus) = ``searchable`` + the three hidden counts, each item by the first rule it
    fails; ``counted`` says whether a large table was sampled."""

    source: str
    table_rows: int | None
    items: int
    searchable: int
    below_min_length: int
    hidden_by_incomplete_parents: int
    excluded_by_source_rule: int
    missing_embedding: int
    counted: str


@dataclass(frozen=True)
class FilterCheck:
    """One row of ``corpus_check_filters``: a piece of a filter object, kept or dropped."""

    field: str
    accepted: bool
    condition: Any
    reason: str | None
    sqlstate: str | None


@dataclass(frozen=True)
class HealthRow:
    """One row of ``corpus_health_check``."""

    check: str
    corpus: str | None
    source: str | None
    status: str
    count: int
    detail: Any
    hint: str | None


@dataclass(frozen=True)
class Item:
    """The row of ``corpus_fetch``: one item's full text and provenance."""

    corpus: str
    source: str
    item_id: str
    parent_id: str
    content: str | None
    locator: dict[str, Any]
    metadata: dict[str, Any]
    embedding_stale: bool


@dataclass(frozen=True)
class TuneRun:
    """The row of ``corpus_tune``: the cross-validated figures and the settings chosen."""

    run_id: int
    queries: int
    folds: int
    baseline_ndcg: float
    tuned_ndcg: float
    gain: float
    p_value: float
    significant: bool
    applied: bool
    #: ``{"rrf_k", "window", "feedback", "feedback_beta", "feedback_alpha", "feedback_terms",
    #: "weights": {source: {"semantic", "lexical"}}}``
    settings: dict[str, Any]
    #: the corpus' settings before, in the same shape
    previous: dict[str, Any]


@dataclass(frozen=True)
class EvalRun:
    """One row of ``corpus_evaluate``: a stored run of one mode."""

    run_id: int | None
    mode: str
    queries: int
    precision_at_k: float
    recall_at_k: float
    mrr: float
    ndcg_at_k: float


@dataclass(frozen=True)
class RunComparison:
    """One row of ``corpus_compare_runs``: run B against run A for one metric."""

    metric: str
    queries: int
    mean_a: float
    mean_b: float
    delta: float
    wins: int
    losses: int
    ties: int
    p_value: float


@dataclass(frozen=True)
class QueryComparison:
    """One row of ``corpus_compare_queries``."""

    query_id: str
    value_a: float | None
    value_b: float | None
    delta: float | None


@dataclass(frozen=True)
class CorpusInfo:
    """One row of ``corpus_list``."""

    name: str
    description: str | None
    isolation: dict[str, Any]
    required_filters: list[str]
    filter_fields: dict[str, Any]
    sources: list[dict[str, Any]]
    #: named embedding spaces: ``{"name": {"dimensions": n, "model": ..., "weight": w}}``
    spaces: dict[str, Any] = field(default_factory=dict)
    #: the evidence filter's settings: ``{"enabled", "rare_share", "min_coverage", "vector": {space: …}}``
    evidence: dict[str, Any] = field(default_factory=dict)
    #: must-include classes: ``[{"name", "source", "filters", "top"}]``
    must_include: list[dict[str, Any]] = field(default_factory=list)
    #: graph expansion limits: ``{"seeds", "max_added", "hop_penalty"}``
    graph: dict[str, Any] = field(default_factory=dict)
    #: registered edge sets: ``[{"name", "edge_table", "from_source", "from_column", "to_source", "to_column"}]``
    edges: list[dict[str, Any]] = field(default_factory=list)
    #: the fusion defaults of its searches: ``{"rrf_k", "window", "feedback"}`` (the keys set)
    ranking: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class QueryKey:
    """One row of ``bm25_query``: a key the lexical branch looks up."""

    key: str
    weight: float
    count: int


@dataclass(frozen=True)
class LexicalRefresh:
    """One row of ``corpus_refresh_lexical_stats``."""

    corpus: str
    documents: int
    terms: int
    refreshed: bool


@dataclass(frozen=True)
class QueuedItem:
    """An item claimed for embedding (``corpus_embedding_claim``); hand it back to
    ``complete``, ``fail`` or ``release``. ``table_oid`` identifies the table even if it is
    renamed meanwhile (the calls that take the item back use it)."""

    table_oid: int
    item_table: str
    embedding_column: str
    item_id: str
    version: int
    content: str
    model: str | None
    dimensions: int
    reason: str
    attempts: int

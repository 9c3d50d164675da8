"""Randomized isolation and searchable-contract test.

Three shared item tables over one parent table (plus one item table without a parent table,
where the isolation columns live on the item rows). For each of three seeded "worlds", 2–5 random
corpora are defined over those shared tables: a random isolation predicate (region and/or tier,
scalar or list), one or two sources, random source rules, completeness rules, min_length,
distance, filter fields and sometimes a required filter. Then 1,020 random searches (modes,
vectors, texts, k, filters, max_per_parent, candidates, rrf_k) are checked against an oracle we
compute ourselves in plain SQL:

* every hit is an eligible item of that corpus: the parent row (looked up by us) satisfies the
  isolation predicate, the item satisfies the searchable contract (embedding for the semantic
  branch, char_length(btrim(text)) >= min_length, parent required columns non-empty, source
  rule), the caller filters, and for the lexical branch the OR-match of the query's words;
* hits respect max_per_parent (default 3, NULL/0 = no cap) and are never more than k;
* exactly min(k, sum over parents of min(cap, eligible items of the parent)) rows come back,
  i.e. k rows whenever k eligible items exist;
* for every fourth search, the paths beside it: its second page (eligible, disjoint, the cap
  over both pages, min(2k, reachable) rows in all), corpus_fetch of eligible items and of other
  corpora's (answered as a missing id) and corpus_why_not of the latter (`not_in_corpus`).

How I convinced myself it fails when the invariants break: every corpus is a minority slice of
the shared tables (asserted below), and query vectors are drawn near random items of the WHOLE
table, so without the isolation predicate in a branch the nearest neighbours are mostly foreign
and show up at once; dropping a searchable-contract clause returns ineligible rows (about a
quarter of the rows are ineligible for one reason or another); starving on a small slice or
after capping returns fewer rows than the oracle's count.
"""
import json
from collections import Counter, defaultdict

import numpy as np
import psycopg
import pytest
from psycopg import sql as S

DIM = 32
N_ORG, N_DOCS, N_NOTES, N_OWNERS, N_MEMOS = 300, 3000, 1500, 200, 1200
OWNER_BASE = 100_000          # memos' parent ids: disjoint from org ids
REGIONS = ["north", "south", "east", "west", "center"]
TIERS = [1, 2, 3, 4]
LANGS = ["en", "he", "fr"]
LABELS = ["alpha", "beta", "gamma", "delta"]
WORLD_SEEDS = [101, 202, 303]
SEARCHES_PER_WORLD = 340      # 1,020 searches in all

# item-table layout per source
TABLES = {
    "docs": dict(table="docs", text="body", tsv="body_tsv", emb="emb", fk="org_id",
                 parent="org", item_cols={"lang", "pages", "status"}),
    "notes": dict(table="notes", text="note", tsv="note_tsv", emb="emb", fk="org_id",
                  parent="org", item_cols={"lang", "pages", "status"}),
    "memos": dict(table="memos", text="body", tsv="tsv", emb="emb", fk="owner_id",
                  parent=None, item_cols={"lang", "pages", "status", "region", "tier", "year",
                                          "label"}),
}
FILTER_TYPES = {"lang": "text", "pages": "integer", "year": "integer", "label": "text"}

SCHEMA = f"""
CREATE TABLE org (id bigint PRIMARY KEY, region text NOT NULL, tier int NOT NULL, name text,
                  label text, year int);
CREATE TABLE docs (id bigint PRIMARY KEY, org_id bigint NOT NULL REFERENCES org, body text,
    body_tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED,
    emb vector({DIM}), status text, lang text, pages int);
CREATE TABLE notes (id text PRIMARY KEY, org_id bigint NOT NULL REFERENCES org, note text NOT NULL,
    note_tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', note)) STORED,
    emb vector({DIM}), status text, lang text, pages int);
CREATE TABLE memos (id bigint PRIMARY KEY, owner_id bigint NOT NULL, region text NOT NULL,
    tier int NOT NULL, year int, label text, body text NOT NULL,
    tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED,
    emb vector({DIM}), status text, lang text, pages int);
CREATE INDEX ON docs (org_id);
CREATE INDEX ON notes (org_id);
CREATE INDEX ON memos (owner_id);
CREATE INDEX ON docs USING gin (body_tsv);
CREATE INDEX ON notes USING gin (note_tsv);
CREATE INDEX ON memos USING gin (tsv);
"""


def gen_text(rng, tg, allow_null=False):
    r = rng.random()
    if allow_null and r < 0.02:
        return None
    if r < 0.05:
        return "   "                                   # blank
    if r < 0.10:
        return "   " + tg.text(1, 3) + "    "          # short, padded with spaces
    if r < 0.22:
        return tg.text(2, 8)                           # around the 20–80 length thresholds
    return tg.text(8, 30)


@pytest.fixture(scope="module")
def world_db(cluster, pgc):
    conn = cluster.create_db("pgc_isolation")
    conn.execute(SCHEMA)
    rng = np.random.default_rng(4242)
    tg = pgc.TextGen(4243, vocab_size=600)
    centers = pgc.random_unit_vectors(rng, 24, DIM)

    def emb(center):
        if rng.random() < 0.08:
            return None
        return pgc.unit(centers[center] + rng.standard_normal(DIM) * 0.35)

    def pick(values, p_null=0.0):
        if rng.random() < p_null:
            return None
        return values[rng.integers(len(values))]

    org, org_center = [], {}
    for oid in range(1, N_ORG + 1):
        r = rng.random()
        name = None if r < 0.07 else ("" if r < 0.14 else tg.text(1, 2))
        org.append(dict(id=oid, region=pick(REGIONS), tier=int(pick(TIERS)), name=name,
                        label=pick(LABELS, 0.07), year=int(rng.integers(1990, 2025))))
        org_center[oid] = int(rng.integers(len(centers)))
    item_common = lambda: dict(status=pick(["ok", "ok", "ok", "draft"], 0.1),  # noqa: E731
                               lang=pick(LANGS, 0.05), pages=int(rng.integers(1, 300)))
    docs = []
    for i in range(1, N_DOCS + 1):
        oid = int(rng.integers(1, N_ORG + 1))
        docs.append(dict(id=i, org_id=oid, body=gen_text(rng, tg, allow_null=True),
                         emb=emb(org_center[oid]), **item_common()))
    notes = []
    for i in range(1, N_NOTES + 1):
        oid = int(rng.integers(1, N_ORG + 1))
        notes.append(dict(id=f"n-{i:05d}", org_id=oid, note=gen_text(rng, tg),
                          emb=emb(org_center[oid]), **item_common()))
    owners = {OWNER_BASE + j: (pick(REGIONS), int(pick(TIERS)), int(rng.integers(len(centers))))
              for j in range(1, N_OWNERS + 1)}
    memos = []
    for i in range(1, N_MEMOS + 1):
        owner = OWNER_BASE + int(rng.integers(1, N_OWNERS + 1))
        region, tier, center = owners[owner]
        memos.append(dict(id=i, owner_id=owner, region=region, tier=tier,
                          year=int(rng.integers(1990, 2025)), label=pick(LABELS, 0.07),
                          body=gen_text(rng, tg), emb=emb(center), **item_common()))
    pgc.copy_rows(conn, "org", list(org[0]), org)
    pgc.copy_rows(conn, "docs", list(docs[0]), docs)
    pgc.copy_rows(conn, "notes", list(notes[0]), notes)
    pgc.copy_rows(conn, "memos", list(memos[0]), memos)
    # one ANN index, so the small-slice + HNSW path is exercised too
    conn.execute("SET max_parallel_maintenance_workers = 0")
    conn.execute("CREATE INDEX ON docs USING hnsw (emb vector_cosine_ops)")
    conn.execute("ANALYZE")
    all_embs = np.array([d["emb"] for d in docs + notes + memos if d["emb"] is not None])
    return dict(conn=conn, vocab=tg.vocab, centers=centers, embs=all_embs)


# ---------------------------------------------------------------------------------------------
# Random corpus definitions
# ---------------------------------------------------------------------------------------------

def random_isolation(rng):
    choice = rng.integers(4)
    regions = list(rng.choice(REGIONS, size=3, replace=False))
    tiers = [int(t) for t in rng.choice(TIERS, size=2, replace=False)]
    if choice == 0:
        return {"region": regions[0]}
    if choice == 1:
        return {"region": regions[:2]}
    if choice == 2:
        return {"tier": tiers[0]}
    return {"region": regions, "tier": tiers}


def random_corpus(rng, name, two_sources=False, with_required=False):
    combos = [["docs", "notes"], ["docs", "memos"], ["notes", "memos"], ["docs"], ["notes"],
              ["memos"]]
    names = combos[rng.integers(3 if two_sources else len(combos))]
    fields = [f for f in FILTER_TYPES if rng.random() < 0.6]
    if with_required and not fields:
        fields = ["lang"]
    required = ([fields[rng.integers(len(fields))]]
                if fields and (with_required or rng.random() < 0.3) else [])
    sources = []
    for n, s in enumerate(names):
        t = TABLES[s]
        preq = [c for c in ("name", "label") if t["parent"] and rng.random() < 0.4]
        with_rule = rng.random() < 0.5 or (two_sources and n == 0)
        sources.append(dict(
            name=s, rule={"status": "ok"} if with_rule else {},
            parent_required=preq,
            min_length=[None, 1, 20, 80][rng.integers(4)],
            distance="cosine" if s == "docs" else ["cosine", "l2", "ip"][rng.integers(3)],
            semantic_weight=float(rng.choice([1.0, 0.5, 2.0])),
            lexical_weight=float(rng.choice([1.0, 0.5, 2.0]))))
    return dict(name=name, isolation=random_isolation(rng), filter_fields={
        f: FILTER_TYPES[f] for f in fields}, required=required, sources=sources)


def create_corpus(conn, c):
    conn.execute("SELECT corpus.corpus_drop(%s, if_exists => true)", [c["name"]])
    conn.execute(
        "SELECT corpus.corpus_create(%s, isolation => %s::jsonb, required_filters => "
        "%s::text[], filter_fields => %s::jsonb)",
        [c["name"], json.dumps(c["isolation"]), c["required"], json.dumps(c["filter_fields"])])
    for s in c["sources"]:
        t = TABLES[s["name"]]
        args = dict(corpus=c["name"], source=s["name"], item_table=t["table"],
                    text_column=t["text"], embedding_column=t["emb"], tsv_column=t["tsv"],
                    parent_fk=t["fk"], rule=json.dumps(s["rule"]), distance=s["distance"],
                    semantic_weight=s["semantic_weight"], lexical_weight=s["lexical_weight"],
                    locator=json.dumps({"pages": "pages"}))
        casts = {"item_table": "regclass", "rule": "jsonb", "locator": "jsonb",
                 "semantic_weight": "float8", "lexical_weight": "float8"}
        if t["parent"]:
            args.update(parent_table=t["parent"], parent_required=s["parent_required"],
                        metadata=json.dumps({"org_name": "parent.name"}))
            casts.update(parent_table="regclass", parent_required="text[]", metadata="jsonb")
        if s["min_length"] is not None:
            args["min_length"] = s["min_length"]
            casts["min_length"] = "int"
        named = ", ".join(f"{k} => %({k})s::{casts.get(k, 'text')}"
                          for k in args if k not in ("corpus", "source"))
        conn.execute(f"SELECT corpus.corpus_add_source(%(corpus)s, %(source)s, {named})",
                     args)


# ---------------------------------------------------------------------------------------------
# The oracle
# ---------------------------------------------------------------------------------------------

def col(field, t):
    """Where a filter/isolation field lives for a source: item table first, then parent."""
    return S.SQL("i.{}" if field in t["item_cols"] else "p.{}").format(S.Identifier(field))


def cond_value(c, v):
    if isinstance(v, list):
        return S.SQL("{} = ANY({})").format(c, S.Literal(v))
    if isinstance(v, dict):
        ops = {"eq": "=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
        return S.SQL(" AND ").join(S.SQL("{} {} {}").format(c, S.SQL(ops[o]), S.Literal(x))
                                   for o, x in v.items())
    return S.SQL("{} = {}").format(c, S.Literal(v))


def eligible_sql(c, s, filters, need_vec, need_text, query_text):
    t = TABLES[s["name"]]
    conds = []
    for field, v in c["isolation"].items():
        conds.append(cond_value(col(field, t), v))
    for field, v in s["rule"].items():
        conds.append(cond_value(S.SQL("i.{}").format(S.Identifier(field)), v))
    conds.append(S.SQL("char_length(btrim(i.{})) >= {}").format(
        S.Identifier(t["text"]), S.Literal(s["min_length"] or 50)))
    for p in s["parent_required"]:
        conds.append(S.SQL("nullif(btrim(p.{}::text), '') IS NOT NULL").format(S.Identifier(p)))
    for field, v in filters.items():
        conds.append(cond_value(col(field, t), v))
    sem = S.SQL("i.{} IS NOT NULL").format(S.Identifier(t["emb"]))
    lex = S.SQL("tsvector_to_array(i.{}) && tsvector_to_array(to_tsvector('simple', {}))").format(
        S.Identifier(t["tsv"]), S.Literal(query_text or ""))
    if need_vec and need_text:
        conds.append(S.SQL("({} OR {})").format(sem, lex))
    elif need_vec:
        conds.append(sem)
    elif need_text:
        conds.append(lex)
    join = (S.SQL("JOIN {} p ON p.id = i.{}").format(S.Identifier(t["parent"]),
                                                     S.Identifier(t["fk"]))
            if t["parent"] else S.SQL(""))
    return S.SQL("SELECT {src}::text, i.id::text, i.{fk}::text FROM {tbl} i {join} WHERE {w}"
                 ).format(src=S.Literal(s["name"]), fk=S.Identifier(t["fk"]),
                          tbl=S.Identifier(t["table"]), join=join,
                          w=S.SQL(" AND ").join(conds))


def parent_rows_sql(hits):
    """Our own look-up of each hit's item and parent row: item fk, and the parent's
    isolation columns (from the item row for memos)."""
    parts = []
    by_src = defaultdict(list)
    for h in hits:
        by_src[h["source"]].append(h["item_id"])
    for src, ids in by_src.items():
        t = TABLES.get(src)
        if t is None:
            continue
        if t["parent"]:
            parts.append(S.SQL(
                "SELECT {src}::text, i.id::text, i.{fk}::text, p.region, p.tier FROM {tbl} i "
                "JOIN org p ON p.id = i.{fk} WHERE i.id::text = ANY({ids})").format(
                src=S.Literal(src), fk=S.Identifier(t["fk"]), tbl=S.Identifier(t["table"]),
                ids=S.Literal(ids)))
        else:
            parts.append(S.SQL(
                "SELECT {src}::text, i.id::text, i.owner_id::text, i.region, i.tier FROM memos i "
                "WHERE i.id::text = ANY({ids})").format(src=S.Literal(src), ids=S.Literal(ids)))
    return S.SQL(" UNION ALL ").join(parts)


def satisfies(isolation, region, tier):
    for field, v in isolation.items():
        actual = region if field == "region" else tier
        allowed = v if isinstance(v, list) else [v]
        if actual not in allowed:
            return False
    return True


# ---------------------------------------------------------------------------------------------
# Random searches
# ---------------------------------------------------------------------------------------------

def random_filters(rng, c):
    f = {}
    for field in c["filter_fields"]:
        if field not in c["required"] and rng.random() > 0.3:
            continue
        r = rng.random()
        if field in c["required"]:
            r = r * 0.6   # a required (scope) filter is an equality or a value list
        if field in ("lang", "label"):
            values = LANGS if field == "lang" else LABELS
            f[field] = (values[rng.integers(len(values))] if r < 0.6 else
                        [str(x) for x in rng.choice(values, size=2, replace=False)])
        elif field == "pages":
            a = int(rng.integers(1, 300))
            if field in c["required"]:
                f[field] = [int(x) for x in rng.integers(1, 300, size=40)] if r < 0.3 else a
            else:
                f[field] = ({"gte": a} if r < 0.3 else {"lt": a} if r < 0.5 else
                            {"gt": min(a, 150), "lte": max(a, 150)} if r < 0.8 else
                            [a, a + 1, a + 2] if r < 0.9 else a)
        else:
            y = int(rng.integers(1990, 2025))
            if field in c["required"]:
                f[field] = {"eq": y} if r < 0.2 else [y, y + 1, y + 2, y + 3] if r < 0.4 else y
            else:
                f[field] = {"gte": y} if r < 0.5 else {"eq": y} if r < 0.6 else \
                    {"gt": y - 8, "lt": y} if r < 0.9 else y
    return f


def random_search(rng, world, c, pgc):
    mode = ["hybrid", "semantic", "lexical"][rng.choice(3, p=[0.4, 0.3, 0.3])]
    vocab = world["vocab"]
    if rng.random() < 0.7:
        base = world["embs"][rng.integers(len(world["embs"]))]
    else:
        base = world["centers"][rng.integers(len(world["centers"]))]
    vec = pgc.unit(base + rng.standard_normal(DIM) * 0.2)
    words = [vocab[rng.integers(50)] if rng.random() < 0.4 else vocab[rng.integers(len(vocab))]
             for _ in range(int(rng.integers(1, 5)))]
    if rng.random() < 0.05:
        words.append("qqqnowhere")
    text = " ".join(words)
    if mode == "hybrid":
        r = rng.random()
        if r < 0.15:
            vec = None
        elif r < 0.3:
            text = None
    elif mode == "semantic" and rng.random() < 0.5:
        text = None
    elif mode == "lexical" and rng.random() < 0.5:
        vec = None
    kw = dict(k=int(rng.choice([1, 2, 5, 10, 25, 60])), filters=random_filters(rng, c),
              mode=mode)
    mpp = rng.integers(6)
    kw["max_per_parent"] = [pgc.DEFAULT, None, 0, 1, 2, 5][mpp]
    kw["candidates"] = pgc.DEFAULT if rng.random() < 0.8 else int(rng.choice([1, 5, 40]))
    kw["rrf_k"] = pgc.DEFAULT if rng.random() < 0.8 else int(rng.integers(1, 200))
    return vec, text, kw


def check_search(conn, pgc, c, vec, text, kw, beside=None):
    """Returns a list of problems (empty when the search is right) and the oracle count;
    `beside` (a random generator): also check the paths beside the search."""
    mode = kw["mode"]
    need_vec = mode == "semantic" or (mode == "hybrid" and vec is not None)
    need_text = mode == "lexical" or (mode == "hybrid" and text is not None)
    rows = pgc.search(conn, c["name"], vec, text, **kw)
    eligible = conn.execute(S.SQL(" UNION ALL ").join(
        eligible_sql(c, s, kw["filters"], need_vec, need_text, text) for s in c["sources"]
    )).fetchall()
    eligible_set = {(s, i): p for s, i, p in eligible}
    per_parent = Counter(p for _, _, p in eligible)
    mpp = kw["max_per_parent"]
    cap = 3 if mpp is pgc.DEFAULT else (mpp or None)
    reachable = sum(min(n, cap) if cap else n for n in per_parent.values())
    expected = min(kw["k"], reachable)

    problems = []
    keys = [(r["source"], r["item_id"]) for r in rows]
    if len(set(keys)) != len(keys):
        problems.append("duplicate hits")
    if [r["rank"] for r in rows] != list(range(1, len(rows) + 1)):
        problems.append(f"ranks not 1..n: {[r['rank'] for r in rows]}")
    scores = [r["score"] for r in rows]
    if any(a < b for a, b in zip(scores, scores[1:])):
        problems.append("scores not in descending order")
    for r in rows:
        if r["corpus"] != c["name"]:
            problems.append(f"hit names corpus {r['corpus']}")
        if (r["source"], r["item_id"]) not in eligible_set:
            problems.append(f"ineligible/foreign hit {r['source']}:{r['item_id']}")
        elif eligible_set[(r["source"], r["item_id"])] != r["parent_id"]:
            problems.append(f"wrong parent_id for {r['source']}:{r['item_id']}: "
                            f"{r['parent_id']}")
        if mode == "semantic" and (r["semantic_rank"] is None or r["lexical_rank"] is not None):
            problems.append(f"semantic mode hit with ranks {r['semantic_rank']}, "
                            f"{r['lexical_rank']}")
        if mode == "lexical" and (r["lexical_rank"] is None or r["semantic_rank"] is not None):
            problems.append(f"lexical mode hit with ranks {r['semantic_rank']}, "
                            f"{r['lexical_rank']}")
    # isolation, checked directly on the parent rows
    if rows:
        looked_up = {(s, i): (p, reg, tier) for s, i, p, reg, tier in
                     conn.execute(parent_rows_sql(rows)).fetchall()}
        for r in rows:
            got = looked_up.get((r["source"], r["item_id"]))
            if got is None:
                problems.append(f"hit {r['source']}:{r['item_id']} is no row of its source")
            elif not satisfies(c["isolation"], got[1], got[2]):
                problems.append(f"FOREIGN item {r['source']}:{r['item_id']} parent {got[0]} "
                                f"(region={got[1]}, tier={got[2]})")
    if cap:
        over = {p: n for p, n in Counter(r["parent_id"] for r in rows).items() if n > cap}
        if over:
            problems.append(f"max_per_parent={cap} exceeded: {over}")
    if len(rows) != expected:
        problems.append(f"{len(rows)} rows, expected {expected} (k={kw['k']}, "
                        f"{len(eligible)} eligible items, {reachable} under the cap)")
    if beside is not None:
        problems += check_pages_fetch_why_not(conn, pgc, c, vec, text, kw, rows, eligible_set, reachable, beside)
    return problems, expected, len(eligible)


def foreign_sql(c, s, limit):
    """Items of the source's table outside the corpus predicate (the other corpora's)."""
    t = TABLES[s["name"]]
    inside = S.SQL(" AND ").join(cond_value(col(f, t), v) for f, v in c["isolation"].items())
    join = (S.SQL("JOIN {} p ON p.id = i.{}").format(S.Identifier(t["parent"]), S.Identifier(t["fk"]))
            if t["parent"] else S.SQL(""))
    return S.SQL("SELECT i.id::text FROM {tbl} i {join} WHERE NOT ({inside}) ORDER BY md5(i.id::text) LIMIT {n}"
                 ).format(tbl=S.Identifier(t["table"]), join=join, inside=inside, n=S.Literal(limit))


def check_pages_fetch_why_not(conn, pgc, c, vec, text, kw, first, eligible_set, reachable, rng):
    """The paths beside a search, under the same predicate: the second page of the ranking (only
    eligible items, none of the first page's, the cap over both, k more rows while the corpus has
    them); corpus_fetch of eligible items (returned as they are) and of other corpora's items
    (the same 42704 as an id that does not exist); corpus_why_not of another corpus' item (only
    `not_in_corpus`, as for a missing id)."""
    problems = []
    k = kw["k"]
    second = pgc.search(conn, c["name"], vec, text, **kw, offset=k)
    if [r["rank"] for r in second] != list(range(k + 1, k + 1 + len(second))):
        problems.append(f"page 2 ranks {[r['rank'] for r in second]}")
    keys = {(r["source"], r["item_id"]) for r in first}
    for r in second:
        if (r["source"], r["item_id"]) not in eligible_set:
            problems.append(f"page 2: ineligible/foreign hit {r['source']}:{r['item_id']}")
        if (r["source"], r["item_id"]) in keys:
            problems.append(f"page 2 repeats {r['source']}:{r['item_id']}")
    mpp = kw["max_per_parent"]
    cap = 3 if mpp is pgc.DEFAULT else (mpp or None)
    if cap and any(n > cap for n in Counter(r["parent_id"] for r in first + second).values()):
        problems.append("pages 1 and 2 exceed the cap together")
    if len(first) + len(second) != min(2 * k, reachable):
        problems.append(f"pages 1 and 2 hold {len(first)} + {len(second)} rows, expected "
                        f"{min(2 * k, reachable)} ({reachable} under the cap)")
    filters = json.dumps(kw["filters"])
    for s in c["sources"]:
        fetchable = conn.execute(eligible_sql(c, s, kw["filters"], False, False, None)).fetchall()
        for _, item, parent in [fetchable[i] for i in rng.permutation(len(fetchable))[:2]]:
            got = conn.execute("SELECT source, item_id, parent_id FROM corpus.corpus_fetch(%s, %s, %s, %s::jsonb)",
                               [c["name"], s["name"], item, filters]).fetchall()
            if got != [(s["name"], item, parent)]:
                problems.append(f"fetch of eligible {s['name']}:{item} gave {got}")
        missing = fetch_error(conn, c["name"], s["name"], "no-such-item-0", filters)
        for (item,) in conn.execute(foreign_sql(c, s, 2)).fetchall():
            err = fetch_error(conn, c["name"], s["name"], item, filters)
            if err is None or (err[0], err[1].replace(item, "?")) != (missing[0], missing[1].replace("no-such-item-0", "?")):
                problems.append(f"fetch of foreign {s['name']}:{item}: {err} (a missing id: {missing})")
            why = conn.execute("SELECT reason, detail::text FROM corpus.corpus_why_not(%s, %s, %s, %s::vector, %s, "
                               "k => %s, filters => %s::jsonb, mode => %s)",
                               [c["name"], s["name"], item, None if vec is None else pgc.vec_text(vec), text, k,
                                filters, kw["mode"]]).fetchall()
            if why != [("not_in_corpus", "{}")]:
                problems.append(f"why_not of foreign {s['name']}:{item}: {why}")
    return problems


def fetch_error(conn, corpus, source, item, filters):
    """(SQLSTATE, message) of a corpus_fetch that fails, None when it returns."""
    try:
        with conn.transaction():
            conn.execute("SELECT * FROM corpus.corpus_fetch(%s, %s, %s, %s::jsonb)", [corpus, source, item, filters])
        return None
    except psycopg.Error as e:
        return e.sqlstate, e.diag.message_primary


def create_world(conn, rng, seed):
    """2-5 random corpora over the shared tables, each a minority slice of them."""
    # every world has a corpus with two sources and one with a required filter
    corpora = [random_corpus(rng, f"w{seed}_c{i}", two_sources=(i == 0), with_required=(i == 1))
               for i in range(int(rng.integers(2, 6)))]
    for c in corpora:
        create_corpus(conn, c)
        # the corpus is a minority slice of its shared tables: foreign rows abound
        for s in c["sources"]:
            t = TABLES[s["name"]]
            total, inside = conn.execute(S.SQL(
                "SELECT count(*), count(*) FILTER (WHERE {iso}) FROM {tbl} i {join}").format(
                iso=S.SQL(" AND ").join(cond_value(col(f, t), v)
                                        for f, v in c["isolation"].items()),
                tbl=S.Identifier(t["table"]),
                join=S.SQL("JOIN org p ON p.id = i.{}").format(S.Identifier(t["fk"]))
                if t["parent"] else S.SQL(""))).fetchone()
            assert 0 < inside < 0.7 * total, (c["name"], s["name"], inside, total)
    return corpora


def run_searches(world_db, pgc, rng, corpora, searches):
    """`searches` random searches of the corpora checked against the oracle: the failures and
    counts of full and short answers."""
    conn = world_db["conn"]
    failures, stats = [], Counter()
    forced = None
    for n in range(searches):
        c = corpora[rng.integers(len(corpora))]
        vec, text, kw = random_search(rng, world_db, c, pgc)
        # half of the searches force the approximate (HNSW iterative scan) semantic path
        approximate = bool(rng.random() < 0.5)
        if approximate != forced:
            conn.execute("SET pg_corpus.exact_search_max_rows = 0" if approximate
                         else "RESET pg_corpus.exact_search_max_rows")
            forced = approximate
        # every fourth search: its second page, fetches and why-nots too
        problems, expected, n_eligible = check_search(conn, pgc, c, vec, text, kw,
                                                      beside=rng if n % 4 == 0 else None)
        stats["full_k" if expected == kw["k"] else "short"] += 1
        stats["nonempty" if expected else "empty"] += 1
        if problems:
            shown = {k: v for k, v in kw.items() if v is not pgc.DEFAULT}
            failures.append(
                f"search #{n}: corpus {c['name']} = {json.dumps(c)}\n"
                f"  exact_search_max_rows={'0' if approximate else 'default'} "
                f"query_vec={'NULL' if vec is None else pgc.vec_text(vec)} "
                f"query_text={text!r} {json.dumps(shown)}\n  " + "\n  ".join(problems[:6]))
    conn.execute("RESET pg_corpus.exact_search_max_rows")
    assert not failures, f"{len(failures)} of {searches} searches wrong:\n" + "\n".join(failures[:8])
    return stats


@pytest.mark.parametrize("seed", WORLD_SEEDS)
def test_random_corpora_never_leak(world_db, pgc, seed):
    rng = np.random.default_rng(seed)
    corpora = create_world(world_db["conn"], rng, seed)
    stats = run_searches(world_db, pgc, rng, corpora, SEARCHES_PER_WORLD)
    # the random searches exercised both sides of the k-rows rule
    assert stats["full_k"] >= 50 and stats["short"] >= 20, stats
    assert stats["nonempty"] >= SEARCHES_PER_WORLD * 0.6, stats


def test_random_corpora_never_leak_during_and_after_an_embedding_switch(world_db, pgc):
    """A new embedding column of docs built beside the searched one (half its items stored),
    then made current with force: the oracle holds in both states, for corpora defined before
    the build, the semantic branch ranking by the column current at each moment."""
    conn = world_db["conn"]
    rng = np.random.default_rng(404)
    corpora = create_world(conn, rng, 404)
    conn.execute(f"ALTER TABLE docs ADD COLUMN emb2 vector({DIM})")
    conn.execute("SELECT corpus.corpus_embedding_build('docs', 'emb', 'emb2', 'emb-v2')")
    conn.execute("UPDATE docs SET emb2 = emb WHERE id % 2 = 0")
    run_searches(world_db, pgc, rng, corpora, 120)
    assert conn.execute("SELECT corpus.corpus_embedding_switch('docs', 'emb', 'emb2', force => true)").fetchone()[0] > 0
    TABLES["docs"]["emb"] = "emb2"
    try:
        run_searches(world_db, pgc, rng, corpora, 120)
    finally:
        TABLES["docs"]["emb"] = "emb"

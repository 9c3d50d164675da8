"""The embedding worker reaches every table it serves; a tenant's code on its own table must
never run with those rights. claim reads and complete writes the item table as the table's
owner (restricted security context) after checking the worker's own column privileges, so a
tenant's trigger, policy or generated column sees the tenant as current_user and cannot read
another tenant's rows through the worker."""
import psycopg
import pytest

R = "pgc_wr"
WORKER, TENANT, OTHER = f"{R}_worker", f"{R}_tenant", f"{R}_other"
LONG = "a text long enough to be searchable, about {} and more words here"


@pytest.fixture
def db(cluster, pgc):
    conn = cluster.create_db("pgc_worker_rights")
    for r in (WORKER, TENANT, OTHER):
        conn.execute(f"DROP ROLE IF EXISTS {r}")
        conn.execute(f"CREATE ROLE {r}")
    conn.execute(f"GRANT USAGE, CREATE ON SCHEMA public TO {TENANT}, {OTHER}")
    conn.execute(f"GRANT SELECT, UPDATE, DELETE ON corpus.embedding_queue TO {WORKER}")
    # another tenant's secrets, readable by the worker (it embeds them) but not by the tenant
    conn.execute(f"SET ROLE {OTHER}")
    conn.execute("CREATE TABLE other_items (id int PRIMARY KEY, pid int, body text, tsv tsvector, emb vector(3))")
    conn.execute("INSERT INTO other_items VALUES (1, 1, 'the other tenant''s secret text', NULL, NULL)")
    conn.execute(f"GRANT SELECT ON other_items TO {WORKER}")
    # the tenant's table, with code that tries to use whoever runs it
    conn.execute(f"SET ROLE {TENANT}")
    conn.execute("""
        CREATE TABLE spy_log (who name, what text);
        CREATE FUNCTION spy() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO public.spy_log VALUES (current_user, 'trigger');
            BEGIN
                INSERT INTO public.spy_log SELECT current_user, body FROM public.other_items;
            EXCEPTION WHEN insufficient_privilege THEN
                INSERT INTO public.spy_log VALUES (current_user, 'denied');
            END;
            RETURN NEW;
        END $$;
        CREATE FUNCTION spy_policy(name) RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
        BEGIN INSERT INTO public.spy_log VALUES (current_user, 'policy'); RETURN true; END $$;
        CREATE TABLE items (id int PRIMARY KEY, pid int NOT NULL, body text NOT NULL,
                            tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED, emb vector(3));
        CREATE TRIGGER spy BEFORE UPDATE ON items FOR EACH ROW EXECUTE FUNCTION spy();
    """)
    conn.execute(f"GRANT SELECT (id, body), UPDATE (emb) ON items TO {WORKER}")
    conn.execute(f"GRANT INSERT ON spy_log TO PUBLIC")
    conn.execute("RESET ROLE")
    conn.execute("INSERT INTO items (id, pid, body) VALUES (1, 1, %s), (2, 1, %s)", [LONG.format(1), LONG.format(2)])
    conn.execute("SELECT corpus.corpus_create('wr')")
    conn.execute("""SELECT corpus.corpus_add_source('wr', 'items', 'items', text_column => 'body', tsv_column => 'tsv',
                        embedding_column => 'emb', parent_fk => 'pid', min_length => 5)""")
    yield conn
    conn.execute("RESET ROLE")
    conn.execute("DROP TABLE IF EXISTS items, spy_log, other_items")
    conn.execute("DROP FUNCTION IF EXISTS spy(), spy_policy(name)")
    pgc.drop_roles(conn, (WORKER, TENANT, OTHER))


def claim(db, role=WORKER):
    db.execute(f"SET ROLE {role}")
    try:
        return {r[0]: (r[1], r[2]) for r in db.execute(
            "SELECT item_id, version, content FROM corpus.corpus_embedding_claim(10, only_table => 'items')").fetchall()}
    finally:
        db.execute("RESET ROLE")


def complete(db, item, version, role=WORKER):
    db.execute(f"SET ROLE {role}")
    try:
        return db.execute("SELECT corpus.corpus_embedding_complete('items', 'emb', %s, %s, '[1,0,0]')",
                          [item, version]).fetchone()[0]
    finally:
        db.execute("RESET ROLE")


def test_the_tenants_trigger_runs_as_the_tenant_and_cannot_read_through_the_worker(db):
    claimed = claim(db)
    assert {k: v[1] for k, v in claimed.items()} == {"1": LONG.format(1), "2": LONG.format(2)}
    assert complete(db, "1", claimed["1"][0]) == "stored"
    log = db.execute("SELECT who, what FROM spy_log ORDER BY what").fetchall()
    assert log == [(TENANT, "denied"), (TENANT, "trigger")], log
    assert db.execute("SELECT emb::text FROM items WHERE id = 1").fetchone()[0] == "[1,0,0]"


def test_the_tenants_row_security_policy_runs_as_the_tenant(db):
    db.execute("ALTER TABLE items OWNER TO " + TENANT)
    db.execute(f"SET ROLE {TENANT}")
    db.execute("ALTER TABLE items ENABLE ROW LEVEL SECURITY")
    db.execute("CREATE POLICY spy ON items USING (spy_policy(current_user))")
    db.execute("RESET ROLE")
    # the worker under the tenant's policy is refused: it would hand out only what the policy shows
    with pytest.raises(psycopg.errors.InsufficientPrivilege) as e:
        claim(db)
    assert "row-level security" in e.value.diag.message_primary and "BYPASSRLS" in e.value.diag.message_hint
    db.execute(f"ALTER ROLE {WORKER} BYPASSRLS")
    claimed = claim(db)
    assert set(claimed) == {"1", "2"}
    assert complete(db, "2", claimed["2"][0]) == "stored"
    # the owner is not under its own policy (no FORCE): the policy never ran, and never as the worker
    assert db.execute("SELECT count(*) FROM spy_log WHERE who = %s", [WORKER]).fetchone()[0] == 0


def test_the_worker_needs_its_column_privileges_and_is_told_which(db):
    db.execute(f"REVOKE UPDATE (emb) ON items FROM {WORKER}")
    claimed = claim(db)
    with pytest.raises(psycopg.errors.InsufficientPrivilege) as e:
        complete(db, "1", claimed["1"][0])
    assert 'column "emb"' in e.value.diag.message_primary
    assert 'GRANT UPDATE ("emb") ON "public"."items"' in e.value.diag.message_hint
    db.execute(f"REVOKE SELECT (body) ON items FROM {WORKER}")
    db.execute("UPDATE corpus.embedding_queue SET state = 'pending'")
    with pytest.raises(psycopg.errors.InsufficientPrivilege) as e:
        claim(db)
    assert 'column "body"' in e.value.diag.message_primary
    # nothing was stored, nothing lost: the items are still queued
    assert db.execute("SELECT count(*) FROM corpus.embedding_queue").fetchone()[0] == 2
    assert db.execute("SELECT count(*) FROM items WHERE emb IS NOT NULL").fetchone()[0] == 0


def test_only_a_worker_reaches_items_with_the_owners_rights(db):
    """The owner-rights accessors are no SQL functions: only the worker API reaches them, and
    it refuses a role that is no embedding worker before anything is read or written."""
    assert db.execute("SELECT count(*) FROM pg_proc WHERE pronamespace = 'corpus'::regnamespace "
                      "AND proname LIKE '\\_embedding\\_item\\_%'").fetchone()[0] == 0
    version = db.execute("SELECT version FROM corpus.embedding_queue WHERE item_id = '1'").fetchone()[0]
    for call in (lambda: claim(db, OTHER), lambda: complete(db, "1", version, OTHER)):
        with pytest.raises(psycopg.errors.InsufficientPrivilege) as e:
            call()
        assert "embedding_queue" in e.value.diag.message_primary or "embedding worker" in e.value.diag.message_primary
    assert db.execute("SELECT count(*) FROM items WHERE emb IS NOT NULL").fetchone()[0] == 0
    assert db.execute("SELECT count(*) FROM corpus.embedding_queue").fetchone()[0] == 2


def test_the_worker_serves_tables_only(db):
    """A security_invoker view would read with its owner's rights if the worker ran as that
    owner: a slot planted on a view is refused before anything is read."""
    db.execute(f"SET ROLE {TENANT}")
    db.execute("CREATE VIEW items_view WITH (security_invoker = true) AS SELECT * FROM items")
    db.execute(f"GRANT SELECT ON items_view TO {WORKER}")
    db.execute("RESET ROLE")
    db.execute("""INSERT INTO corpus.embedding_slots
                  SELECT (jsonb_populate_record(NULL::corpus.embedding_slots,
                              to_jsonb(s) || jsonb_build_object('item_table', 'items_view'::regclass::oid))).*
                    FROM corpus.embedding_slots s WHERE s.item_table = 'items'::regclass""")
    db.execute("INSERT INTO corpus.embedding_queue (item_table, embedding_column, item_id, reason) "
               "VALUES ('items_view', 'emb', '1', 'requested')")
    db.execute(f"SET ROLE {WORKER}")
    try:
        with pytest.raises(psycopg.errors.DatatypeMismatch) as e:
            db.execute("SELECT * FROM corpus.corpus_embedding_claim(10, only_table => 'items_view')")
        assert "not a table" in e.value.diag.message_primary and e.value.diag.message_hint
    finally:
        db.execute("RESET ROLE")
        db.execute("DELETE FROM corpus.embedding_slots WHERE item_table = 'items_view'::regclass")
        db.execute("DROP VIEW items_view")


def test_row_security_forced_on_the_owner_is_refused_not_read_as_gone(db):
    """The statements run as the owner: with FORCE ROW LEVEL SECURITY a policy could hide the
    row from it, and claim would take the item for deleted and drop it from the queue."""
    db.execute(f"ALTER TABLE items OWNER TO {TENANT}")
    db.execute(f"ALTER ROLE {WORKER} BYPASSRLS")
    db.execute(f"SET ROLE {TENANT}")
    db.execute("ALTER TABLE items ENABLE ROW LEVEL SECURITY")
    db.execute("ALTER TABLE items FORCE ROW LEVEL SECURITY")
    db.execute("CREATE POLICY nothing ON items USING (false)")
    db.execute("RESET ROLE")
    with pytest.raises(psycopg.errors.InsufficientPrivilege) as e:
        claim(db)
    assert "NO FORCE ROW LEVEL SECURITY" in e.value.diag.message_hint
    assert db.execute("SELECT count(*) FROM corpus.embedding_queue").fetchone()[0] == 2   # nothing dropped


def test_settings_the_tenants_code_changes_do_not_stay_in_the_workers_session(db):
    """A tenant's trigger that sets search_path (or any setting) for the session: the worker's
    session after complete has its own settings back (a later unqualified name of the worker
    must not resolve in the tenant's schema)."""
    db.execute(f"SET ROLE {TENANT}")
    db.execute("""CREATE FUNCTION hook() RETURNS trigger LANGUAGE plpgsql AS $$
                  BEGIN PERFORM pg_catalog.set_config('search_path', 'evil, pg_catalog', false);
                        PERFORM pg_catalog.set_config('statement_timeout', '1', false);
                        RETURN NEW; END $$""")
    db.execute("CREATE TRIGGER hook BEFORE UPDATE OF emb ON items FOR EACH ROW EXECUTE FUNCTION hook()")
    db.execute("RESET ROLE")
    db.execute(f"ALTER TABLE items OWNER TO {TENANT}")
    before = db.execute("SELECT current_setting('search_path'), current_setting('statement_timeout')").fetchone()
    claimed = claim(db)
    assert complete(db, "1", claimed["1"][0]) == "stored"
    assert db.execute("SELECT current_setting('search_path'), current_setting('statement_timeout')"
                      ).fetchone() == before
    db.execute("DROP TRIGGER hook ON items")
    db.execute("DROP FUNCTION hook()")


def test_the_worker_serves_registered_slots_only(db):
    """A worker may write the embedding column of a table it was granted, but the worker API
    only acts on the columns of a registered slot."""
    db.execute(f"SET ROLE {TENANT}")
    db.execute("CREATE TABLE unregistered (id int PRIMARY KEY, body text, emb vector(3))")
    db.execute("INSERT INTO unregistered VALUES (1, 'x', NULL)")
    db.execute(f"GRANT SELECT, UPDATE ON unregistered TO {WORKER}")
    db.execute("RESET ROLE")
    db.execute(f"SET ROLE {WORKER}")
    try:
        for sql in ("SELECT corpus.corpus_embedding_complete('unregistered', 'emb', '1', 1, '[1,1,1]')",
                    "SELECT corpus.corpus_embedding_complete('items', 'body', '1', 1, '[1,1,1]')"):
            with pytest.raises(psycopg.errors.UndefinedObject) as e:
                db.execute(sql)
            assert "no registered embedding column" in e.value.diag.message_primary
    finally:
        db.execute("RESET ROLE")
    assert db.execute("SELECT emb FROM unregistered").fetchone()[0] is None

"""Runs pg-corpus-worker, the re-embed worker of the pg_corpus package (worker/README.md)."""
from pg_corpus.worker import main
raise SystemExit(main())

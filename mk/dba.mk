# DBA targets: the server, the vector indexes, query-time knobs, plans, statistics, upkeep.
# Included by the Makefile (-include mk/*.mk); `make help` lists them. docs/DBA.md explains.
#
# The database is $PYRECALL_DSN, else the embedded server (started on demand). Values given
# as make variables (make index M=16, make explain Q="...") reach Python through the
# environment, never through the shell's parser: whatever they hold, nothing gets executed.

DBA := $(PYRECALL) dba

# index options, knobs, query: exported to the recipes' environment (read by pyrecall dba ... --env)
export INDEX SCOPE M EF_CONSTRUCTION NUM_NEIGHBORS SEARCH_LIST_SIZE MAX_ALPHA STORAGE_LAYOUT \
       NUM_BITS_PER_DIMENSION NUM_DIMENSIONS
export EF_SEARCH ITERATIVE_SCAN MAX_SCAN_TUPLES SCAN_MEM_MULTIPLIER QUERY_SEARCH_LIST_SIZE \
       QUERY_RESCORE ROLE
export Q AGENT EMBED CHUNKS AGENTS PYRECALL_ADMIN_DSN FULL

# DOCKER=1: the server of Dockerfile.postgres (PostgreSQL 17 + pgvector + pgvectorscale)
DOCKER_IMAGE    ?= pyrecall-postgres:latest
DOCKER_NAME     ?= pyrecall-postgres
DOCKER_PORT     ?= 5432
DOCKER_PASSWORD ?= pyrecall
export DOCKER_IMAGE DOCKER_NAME DOCKER_PORT DOCKER_PASSWORD

.PHONY: db-up db-down migrate index index-drop index-info tune explain stats vacuum psql bench bench-index

db-up: $(STAMP)  ## Start PostgreSQL: the embedded server, or DOCKER=1 Dockerfile.postgres; prints the DSN
ifeq ($(DOCKER),1)
	docker build -f Dockerfile.postgres -t "$$DOCKER_IMAGE" .
	docker run -d --name "$$DOCKER_NAME" -p "127.0.0.1:$$DOCKER_PORT:5432" \
	  -e POSTGRES_PASSWORD="$$DOCKER_PASSWORD" -e POSTGRES_DB=pyrecall \
	  -v "$$DOCKER_NAME-data:/var/lib/postgresql/data" "$$DOCKER_IMAGE"
	@until docker exec "$$DOCKER_NAME" pg_isready -U postgres -d pyrecall >/dev/null 2>&1; do sleep 1; done
	@echo "export PYRECALL_DSN=postgresql://postgres:$$DOCKER_PASSWORD@127.0.0.1:$$DOCKER_PORT/pyrecall"
else
	@$(PYRECALL) db start
endif

db-down: $(STAMP)  ## Stop PostgreSQL (DOCKER=1: remove the container; its data volume stays)
ifeq ($(DOCKER),1)
	docker rm -f "$$DOCKER_NAME"
else
	@$(PYRECALL) db stop
endif

migrate: $(STAMP)  ## Create or upgrade the recall schema and functions
	@$(PYRECALL) migrate

index: $(STAMP)  ## Build/refresh vector indexes: INDEX=auto|diskann|hnsw SCOPE=agents|table|both M= EF_CONSTRUCTION= NUM_NEIGHBORS= SEARCH_LIST_SIZE=
	@$(DBA) index --env

index-drop: $(STAMP)  ## Drop every vector index of recall.chunks (concurrently)
	@$(DBA) drop

index-info: $(STAMP)  ## The vector indexes: agent, method, options, size, validity, build time
	@$(DBA) info

tune: $(STAMP)  ## Persist query knobs (ALTER DATABASE; ROLE= for one role): EF_SEARCH= QUERY_SEARCH_LIST_SIZE= QUERY_RESCORE= MAX_SCAN_TUPLES=
	@if [ -n "$$EF_SEARCH$$ITERATIVE_SCAN$$MAX_SCAN_TUPLES$$SCAN_MEM_MULTIPLIER$$QUERY_SEARCH_LIST_SIZE$$QUERY_RESCORE" ]; then \
	  $(DBA) tune --env; fi
	@$(DBA) settings

explain: $(STAMP)  ## EXPLAIN ANALYZE a hybrid_recall call, nested plans too: Q="text" [AGENT=] [EMBED=chunk|model|none]
	@$(DBA) explain

stats: $(STAMP)  ## Table and index sizes, pending embeddings, the largest agents and their vector path
	@$(DBA) stats

vacuum: $(STAMP)  ## VACUUM (ANALYZE) the recall tables; FULL=1: rewrite them (exclusive lock)
	@$(DBA) vacuum

psql: $(STAMP)  ## psql on the database (the embedded server's psql when there is no other)
	@$(DBA) psql

bench: $(STAMP)  ## Latency benchmark, pyrecall bench latency: CHUNKS=1000000 AGENTS=1000 [PYRECALL_ADMIN_DSN=]
	@if $(PYRECALL) bench latency --help >/dev/null 2>&1; then \
	  $(PYRECALL) bench latency --chunks "$${CHUNKS:-1000000}" --agents "$${AGENTS:-1000}" \
	    $${PYRECALL_ADMIN_DSN:+--dsn "$$PYRECALL_ADMIN_DSN"}; \
	else \
	  echo "pyrecall bench latency is not there yet (issue 7). Meanwhile, the index benchmark:"; \
	  echo "  make bench-index CHUNKS=100000 INDEX=hnsw"; \
	fi

bench-index: $(STAMP)  ## Index build time, size, filtered recall@10 and latency per agent size: CHUNKS=100000 INDEX= SCOPE= M= ...
	@$(PYRECALL) bench vector-index --env

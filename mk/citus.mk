# A local Citus cluster (a coordinator and two workers on loopback ports): pyrecall dba citus.
# Included by the Makefile (-include mk/*.mk); docs/SCALING.md explains.

.PHONY: citus-up citus-down

citus-up: $(STAMP)  ## Citus cluster: build Citus if needed, start 3 nodes, migrate, distribute; prints the coordinator URL
	@$(PYRECALL) dba citus up

citus-down: $(STAMP)  ## Stop the Citus cluster and remove its data
	@$(PYRECALL) dba citus down

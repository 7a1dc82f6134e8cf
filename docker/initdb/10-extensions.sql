-- Run once by the postgres image's entrypoint, on first start, in $POSTGRES_DB (and in
-- template1, so that every database created later has them too: the test suite creates one
-- database per test). `pyrecall migrate` creates them as well where they are missing.
create extension if not exists vector;
create extension if not exists vectorscale cascade;
\connect template1
create extension if not exists vector;
create extension if not exists vectorscale cascade;

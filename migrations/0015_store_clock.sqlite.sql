-- The store's clock: every write group of every process that shares the database (a
-- supervisor's workers) advances it in the group's own transaction. A process compares it with
-- what its caches reflect: a version it did not write means another process wrote, and its
-- caches are dropped before they answer (memoryd.services.coherence).
CREATE TABLE store_clock (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL
) STRICT;

INSERT INTO store_clock (id, version) VALUES (1, 0);

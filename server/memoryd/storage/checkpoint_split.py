"""Checkpoint resources of the version 1 format split by owner, as migration 0009 split them:
run again after an import of a version 1 export, on either engine (memoryd.storage
.transfer_store). The statements are migration 0009's, with the engine's JSON member reads; the
migration's file stays as it was applied (its checksum is recorded).

A checkpoint resource was keyed by (agent, 'checkpoint', conversation scope id), which does not
name the owner. Every old resource (a scope id with two ':') is split by the owners of its
revisions: the owner of the checkpoint message a revision names (provenance checkpoint_id), or
for a rollback, the owner of the revision it rolled back to. A revision whose owner cannot be
found (its checkpoint message was erased) is dropped: it is a copy of erased text.
"""

from __future__ import annotations

import functools

from memoryd.storage.engine import Engine


@functools.cache
def statements(engine: Engine) -> str:
    """The split, as one script of statements (no parameters)."""
    member = functools.partial(engine.json_text, "t.provenance_json")
    return _SPLIT.format(
        rolled_back_to=member("rolled_back_to"), checkpoint_id=member("checkpoint_id")
    )


_SPLIT = """\
CREATE TEMP TABLE checkpoint_split AS
WITH RECURSIVE origin (resource_id, revision, target, depth) AS (
    SELECT v.resource_id, v.revision, v.revision, 0
    FROM resource_revisions AS v JOIN resources AS s ON s.id = v.resource_id
    WHERE s.resource_type = 'checkpoint'
        AND length(s.scope_id) - length(replace(s.scope_id, ':', '')) = 2
    UNION ALL
    SELECT o.resource_id, o.revision,
        CAST({rolled_back_to} AS INTEGER), o.depth + 1
    FROM origin AS o
    JOIN resource_revisions AS t ON t.resource_id = o.resource_id AND t.revision = o.target
    WHERE {checkpoint_id} IS NULL
        AND {rolled_back_to} IS NOT NULL
        AND o.depth < 100000
)
SELECT o.resource_id, o.revision, s.agent_id,
    replace(replace(m.owner_id, '%', '%25'), ':', '%3A') || ':' || s.scope_id AS scope_id,
    s.created_at
FROM origin AS o
JOIN resources AS s ON s.id = o.resource_id
JOIN resource_revisions AS t ON t.resource_id = o.resource_id AND t.revision = o.target
JOIN messages AS m ON m.id = CAST({checkpoint_id} AS INTEGER)
    AND m.agent_id = s.agent_id;

INSERT INTO resources (agent_id, resource_type, scope_id, resource_path, created_at, updated_at)
SELECT agent_id, 'checkpoint', scope_id, '', min(created_at), min(created_at)
FROM checkpoint_split GROUP BY agent_id, scope_id
ON CONFLICT (agent_id, resource_type, scope_id) DO NOTHING;

UPDATE resource_revisions AS v SET resource_id = (
    SELECT n.id FROM checkpoint_split AS c
    JOIN resources AS n ON n.agent_id = c.agent_id AND n.resource_type = 'checkpoint'
        AND n.scope_id = c.scope_id
    WHERE c.resource_id = v.resource_id AND c.revision = v.revision
)
WHERE EXISTS (
    SELECT 1 FROM checkpoint_split AS c WHERE c.resource_id = v.resource_id
        AND c.revision = v.revision
);

DELETE FROM resource_revisions WHERE resource_id IN (
    SELECT id FROM resources WHERE resource_type = 'checkpoint'
        AND length(scope_id) - length(replace(scope_id, ':', '')) = 2
);
DELETE FROM resources WHERE resource_type = 'checkpoint'
    AND length(scope_id) - length(replace(scope_id, ':', '')) = 2;

UPDATE resource_revisions AS v SET parent_revision = (
    SELECT max(p.revision) FROM resource_revisions AS p
    WHERE p.resource_id = v.resource_id AND p.revision < v.revision
)
WHERE v.resource_id IN (
    SELECT n.id FROM resources AS n JOIN checkpoint_split AS c ON n.agent_id = c.agent_id
        AND n.resource_type = 'checkpoint' AND n.scope_id = c.scope_id
);

UPDATE resources AS s SET
    current_revision = (
        SELECT max(v.revision) FROM resource_revisions AS v WHERE v.resource_id = s.id
    ),
    updated_at = (
        SELECT v.created_at FROM resource_revisions AS v WHERE v.resource_id = s.id
        ORDER BY v.revision DESC LIMIT 1
    )
WHERE s.id IN (
    SELECT n.id FROM resources AS n JOIN checkpoint_split AS c ON n.agent_id = c.agent_id
        AND n.resource_type = 'checkpoint' AND n.scope_id = c.scope_id
);

DROP TABLE checkpoint_split;
"""

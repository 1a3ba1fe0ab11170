-- 0009: one checkpoint resource per owner of a conversation.
--
-- A checkpoint resource was keyed by (agent, 'checkpoint', conversation scope id), and that scope
-- id does not name the owner: two owners of one agent in the same chat shared one resource and
-- its revisions. The scope id is now `<owner>:<channel>:<chat_id>:<thread>` (the owner escaped
-- as chat_id and thread are: `%` -> %25, `:` -> %3A), so every old resource, whose scope id has
-- two ':', is split by the owners of its revisions: the owner of the checkpoint message a
-- revision names (provenance checkpoint_id), or for a rollback, the owner of the revision it
-- rolled back to. A revision whose owner cannot be found (its checkpoint message was erased)
-- is dropped: it is a copy of erased text. Revision numbers are kept; each new resource's
-- current revision is its newest, and each revision's parent the one before it.
--
-- Only old-style resources are touched, so these statements are also run after an import of a
-- version 1 export, which holds old-style checkpoint resources (memoryd.storage.transfer_store).

CREATE TEMP TABLE checkpoint_split AS
WITH RECURSIVE origin (resource_id, revision, target, depth) AS (
    SELECT v.resource_id, v.revision, v.revision, 0
    FROM resource_revisions AS v JOIN resources AS s ON s.id = v.resource_id
    WHERE s.resource_type = 'checkpoint'
        AND length(s.scope_id) - length(replace(s.scope_id, ':', '')) = 2
    UNION ALL
    SELECT o.resource_id, o.revision,
        CAST(json_extract(t.provenance_json, '$.rolled_back_to') AS INTEGER), o.depth + 1
    FROM origin AS o
    JOIN resource_revisions AS t ON t.resource_id = o.resource_id AND t.revision = o.target
    WHERE json_extract(t.provenance_json, '$.checkpoint_id') IS NULL
        AND json_extract(t.provenance_json, '$.rolled_back_to') IS NOT NULL
        AND o.depth < 100000
)
SELECT o.resource_id, o.revision, s.agent_id,
    replace(replace(m.owner_id, '%', '%25'), ':', '%3A') || ':' || s.scope_id AS scope_id,
    s.created_at
FROM origin AS o
JOIN resources AS s ON s.id = o.resource_id
JOIN resource_revisions AS t ON t.resource_id = o.resource_id AND t.revision = o.target
JOIN messages AS m ON m.id = CAST(json_extract(t.provenance_json, '$.checkpoint_id') AS INTEGER)
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
    current_revision = (SELECT max(v.revision) FROM resource_revisions AS v WHERE v.resource_id = s.id),
    updated_at = (
        SELECT v.created_at FROM resource_revisions AS v WHERE v.resource_id = s.id
        ORDER BY v.revision DESC LIMIT 1
    )
WHERE s.id IN (
    SELECT n.id FROM resources AS n JOIN checkpoint_split AS c ON n.agent_id = c.agent_id
        AND n.resource_type = 'checkpoint' AND n.scope_id = c.scope_id
);

DROP TABLE checkpoint_split;

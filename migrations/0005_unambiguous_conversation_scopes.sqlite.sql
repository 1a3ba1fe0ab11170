-- 0005: conversation scope ids that two conversations can never share.
--
-- A conversation's scope id was `<channel>:<chat_id>:<thread_scope>`, and only the channel
-- refuses ':'. So (matrix, "!room:example.org", root) and (matrix, "!room", "example.org:root")
-- had one scope id and shared their notes. memoryd now escapes '%' as %25 and ':' as %3A in
-- chat_id and thread_scope (memoryd.domain.conversation.ConversationKey.scope_id); an id with
-- neither character reads as before. Existing ids that need escaping are rewritten in memory
-- rows (scope_id, and source_id / source_name of rows written through a conversation) and in
-- memory sources (id, name, memory_scope). Each old id is read:
--   * through the conversation of the same agent and owner whose parts join to it; when two
--     conversations collided, the one created first keeps the rows they shared;
--   * without such a conversation record, taking the part after the last ':' as the thread.

CREATE TEMP TABLE old_scope_ids AS
    SELECT DISTINCT agent_id, owner_id, old FROM (
        SELECT agent_id, owner_id, scope_id AS old FROM memories
            WHERE scope_type = 'conversation'
        UNION ALL
        SELECT agent_id, owner_id, substr(source_id, 14) FROM memories
            WHERE source_type = 'conversation' AND substr(source_id, 1, 13) = 'conversation:'
        UNION ALL
        SELECT agent_id, owner_id, substr(id, 14) FROM memory_sources
            WHERE source_type = 'conversation' AND substr(id, 1, 13) = 'conversation:'
    )
    -- Only ids with a '%' or more than the two separators change.
    WHERE length(old) - length(replace(old, ':', '')) >= 2
        AND (instr(old, '%') > 0 OR length(old) - length(replace(old, ':', '')) > 2);

CREATE TEMP TABLE scope_id_moves AS
    WITH parsed AS (
        SELECT agent_id, owner_id, old,
            substr(old, 1, instr(old, ':') - 1) AS channel,
            substr(old, instr(old, ':') + 1) AS rest
        FROM old_scope_ids
    ),
    split AS (
        -- head: rest up to and including its last ':' (rtrim drops the trailing non-colons).
        SELECT parsed.*, rtrim(rest, replace(rest, ':', '')) AS head FROM parsed
    )
    SELECT agent_id, owner_id, old, coalesce(
        (
            SELECT c.channel || ':' || replace(replace(c.chat_id, '%', '%25'), ':', '%3A')
                || ':' || replace(replace(c.thread_scope, '%', '%25'), ':', '%3A')
            FROM conversations AS c
            WHERE c.agent_id = split.agent_id AND c.owner_id = split.owner_id
                AND c.channel = split.channel
                AND c.channel || ':' || c.chat_id || ':' || c.thread_scope = split.old
            ORDER BY c.id
            LIMIT 1
        ),
        channel
            || ':' || replace(replace(substr(head, 1, length(head) - 1), '%', '%25'), ':', '%3A')
            || ':' || replace(replace(substr(rest, length(head) + 1), '%', '%25'), ':', '%3A')
    ) AS new
    FROM split;

DELETE FROM scope_id_moves WHERE new = old;

-- Rows go through a placeholder that no real id can be (identifiers hold no control
-- characters), so no intermediate state breaks the unique keys.
CREATE TEMP TABLE memory_scope_moves AS
    SELECT r.id, m.new FROM memories AS r
    JOIN scope_id_moves AS m
        ON m.agent_id = r.agent_id AND m.owner_id = r.owner_id AND m.old = r.scope_id
    WHERE r.scope_type = 'conversation';

UPDATE memories SET scope_id = char(1) || id WHERE id IN (SELECT id FROM memory_scope_moves);

UPDATE memories SET scope_id = (SELECT v.new FROM memory_scope_moves AS v WHERE v.id = memories.id)
    WHERE id IN (SELECT id FROM memory_scope_moves);

UPDATE memories SET source_id = 'conversation:' || m.new, source_name = m.new
    FROM scope_id_moves AS m
    WHERE memories.source_type = 'conversation' AND m.agent_id = memories.agent_id
        AND m.owner_id = memories.owner_id AND memories.source_id = 'conversation:' || m.old;

CREATE TEMP TABLE source_moves AS
    SELECT s.agent_id, s.owner_id, s.id AS old_id, m.new FROM memory_sources AS s
    JOIN scope_id_moves AS m
        ON m.agent_id = s.agent_id AND m.owner_id = s.owner_id AND s.id = 'conversation:' || m.old
    WHERE s.source_type = 'conversation';

UPDATE memory_sources SET id = char(1) || id
    WHERE (agent_id, owner_id, id) IN (SELECT agent_id, owner_id, old_id FROM source_moves);

UPDATE memory_sources SET id = 'conversation:' || v.new, name = v.new, memory_scope = v.new
    FROM source_moves AS v
    WHERE v.agent_id = memory_sources.agent_id AND v.owner_id = memory_sources.owner_id
        AND memory_sources.id = char(1) || v.old_id;

DROP TABLE source_moves;
DROP TABLE memory_scope_moves;
DROP TABLE scope_id_moves;
DROP TABLE old_scope_ids;

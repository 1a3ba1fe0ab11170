"""Admission of a write by key: the rules a new fact must pass before it is stored."""

from __future__ import annotations

import dataclasses

from memoryd.domain.memories import (
    MEMORY_BUCKET,
    USER_BUCKET,
    Category,
    NewFact,
    ScopeType,
    StoreRequest,
    check_confidence,
    check_directive_trust,
    check_key,
    check_metadata,
    check_value,
    fact_key,
    generated_key,
    job_scope_id,
)
from memoryd.domain.memory_sources import memory_source_for
from memoryd.domain.quoting import shortened
from memoryd.errors import InvalidArgument, PermissionDenied


def admit_new(request: StoreRequest) -> NewFact:
    """Admission of a write by key: category, scope, trust, key and value rules."""
    caller = request.caller
    category = request.category
    scope_type = request.scope_type
    if category is Category.JOB_RUN_SUMMARY and caller.job_id is None:
        raise InvalidArgument("job_run_summary rows are written by scheduled jobs (set job_id)")
    if caller.job_id is not None:
        if scope_type not in (None, ScopeType.JOB):
            raise PermissionDenied(
                "scheduled jobs write only to their own scope "
                f"{shortened(job_scope_id(caller.job_id))}"
            )
        scope_type = ScopeType.JOB
    if category is None:
        category = Category.FACT
        scope_type = scope_type or ScopeType.CONVERSATION
    elif scope_type is None:
        if category in USER_BUCKET:
            scope_type = ScopeType.OWNER
        elif category in MEMORY_BUCKET:
            scope_type = ScopeType.AGENT
        else:
            scope_type = ScopeType.CONVERSATION
    check_directive_trust(category, request.trust, "write")
    value = check_value(request.value)
    blank = not request.key.strip()
    if blank and request.category is not None:
        key = fact_key(value)
    elif blank and request.scope_type is not None:
        key = generated_key()
    else:
        key = check_key(request.key)
    scope_id = caller.scope_id(scope_type)
    source = memory_source_for(caller)
    return NewFact(
        owner=caller.owner,
        scope_type=scope_type,
        scope_id=scope_id,
        category=category,
        key=key,
        value=value,
        confidence=check_confidence(request.confidence),
        metadata_json=check_metadata(request.metadata_json),
        trust=request.trust,
        provenance=dataclasses.replace(
            source,
            session_id=request.session_id or None,
            run_id=request.run_id or None,
            source_message_id=request.source_message_id or None,
        ),
    )

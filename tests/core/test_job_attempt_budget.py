"""A job carries its attempt budget: the API stamps its MAX_ATTEMPTS on the ``submitted`` event, and every role
hands a lost attempt back, or gives up, by the job's number rather than its own setting (which only counts for
jobs from before jobs carried one)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from hades.core.events import JobSubmitted
from hades.core.lifecycle import SubmitJob, decide, fold
from hades.core.spec import JobSpec, Step

NOW = datetime(2026, 12, 3, 12, tzinfo=UTC)
SPEC = JobSpec(name="budget", steps=(Step(id=1, image="a"),))


def submitted(max_attempts: int | None) -> list[JobSubmitted]:
    job_id = str(uuid.uuid4())
    events = decide(None, SubmitJob(job_id=job_id, spec=SPEC, max_attempts=max_attempts), NOW)
    assert isinstance(events[0], JobSubmitted)
    return [events[0]]


def test_the_budget_is_stamped_on_the_submission_and_folded() -> None:
    [event] = submitted(2)
    assert event.max_attempts == 2
    state = fold([event])
    assert state is not None and state.max_attempts == 2 and state.attempts_allowed(5) == 2


def test_a_job_from_before_budgets_uses_the_roles_setting() -> None:
    state = fold(submitted(None))
    assert state is not None and state.attempts_allowed(5) == 5
    old = JobSubmitted.model_validate_json(submitted(None)[0].model_dump_json(exclude={"max_attempts"}))
    assert old.max_attempts is None  # an event written without the field reads as before

"""The documents generated from the code (``.env.example``, ``docs/configuration.md``, ``docs/events.md``) are
checked in as the generator writes them, and what they are generated from is complete."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from hades import docs
from hades.config import Settings, is_secret
from hades.core.events import JobQueued
from hades.core.spec import Priority

ROOT = Path(__file__).resolve().parents[1]
REGENERATE = ".venv/bin/python -m hades.docs"
SECRETS = {"NATS_PASSWORD", "AUTH_KEY", "DASHBOARD_PASSWORD_HASH", "DASHBOARD_SESSION_SECRET", "WEBHOOK_SECRET"}


@pytest.mark.parametrize("path", sorted(docs.DOCUMENTS))
def test_the_checked_in_document_is_what_the_code_generates(path: str) -> None:
    expected = docs.DOCUMENTS[path]()
    actual = (ROOT / path).read_text(encoding="utf-8") if (ROOT / path).is_file() else None
    assert actual == expected, f"{path} is stale: run `{REGENERATE}` from the repository root"


def test_check_names_a_stale_file_and_the_command_and_writing_fixes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert docs.main(["--check", "--root", str(tmp_path)]) == 1
    assert "docs/events.md differs from the code: run `python -m hades.docs`" in capsys.readouterr().err

    assert docs.main(["--root", str(tmp_path)]) == 0
    (tmp_path / "docs" / "configuration.md").write_text("edited by hand\n", encoding="utf-8")
    assert docs.main(["--check", "--root", str(tmp_path)]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "docs/configuration.md differs from the code: run `python -m hades.docs`"
    ]
    assert docs.main(["--root", str(tmp_path)]) == 0
    assert docs.main(["--check", "--root", str(tmp_path)]) == 0


def test_every_setting_has_a_one_line_description() -> None:
    undescribed = [name for name, field in Settings.model_fields.items() if not (field.description or "").strip()]
    multiline = [name for name, field in Settings.model_fields.items() if "\n" in (field.description or "")]
    assert not undescribed, f"settings without a description= in hades/config/: {undescribed}"
    assert not multiline, f"descriptions must be one line: {multiline}"


def test_every_setting_is_in_a_section_of_the_documents() -> None:
    documented = [setting.variable for group in docs.settings_by_section().values() for setting in group]
    assert sorted(documented) == sorted(str(field.validation_alias) for field in Settings.model_fields.values())
    assert len(docs.settings_by_section()) > 5  # the sections of hades/config/, not one heap


def test_secrets_are_marked_and_never_have_a_value_in_the_documents() -> None:
    secret_fields = [field for field in Settings.model_fields.values() if is_secret(field)]
    marked = {str(field.validation_alias) for field in secret_fields}
    assert marked >= SECRETS
    assert not any(field.repr for field in secret_fields)
    env_example, configuration = docs.render_env_example(), docs.render_configuration()
    for name in marked:
        assert re.search(rf"^(# )?{name}=$", env_example, re.MULTILINE), name
        assert re.search(rf"^\| `{name}` \| (empty|unset) \| \*\*Secret\.\*\* ", configuration, re.MULTILINE), name


def test_the_env_example_read_as_a_dotenv_gives_the_defaults() -> None:
    from_example = Settings(_env_file=ROOT / ".env.example")
    defaults = Settings(_env_file=None)
    assert from_example.model_dump(exclude={"executor_id"}) == defaults.model_dump(exclude={"executor_id"})


def _readme_configuration_variables() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    first_cells = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    return [name for cell in first_cells for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", cell)]


def test_every_variable_the_readme_names_exists() -> None:
    names = _readme_configuration_variables()
    known = {str(field.validation_alias) for field in Settings.model_fields.values()}
    assert names, "README.md's Configuration section names no variable in a table"
    assert not set(names) - known, f"README.md names variables hades/config/ does not read: {set(names) - known}"


def test_each_event_kind_has_its_own_docstring_and_a_subject_its_events_match() -> None:
    for kind in docs.event_kinds():
        assert (kind.__doc__ or "").strip(), f"{kind.__name__} needs a docstring: it is the kind's documentation"
    pattern = docs.subject(JobQueued).replace(".", r"\.").replace("[", "(?:").replace("]", ")?")
    pattern = re.sub(r"<\w+>", r"[^.]+", pattern)
    at = datetime(2026, 1, 1, tzinfo=UTC)
    for pool in (None, "p0123"):
        event = JobQueued(job_id="j1", at=at, attempt=1, priority=Priority.HIGH, pool=pool)
        assert re.fullmatch(pattern, f"hades.events.j1.{event.subject_token}")
    assert docs.subject(docs.event_kinds()[0]) == "hades.events.<job_id>.submitted"

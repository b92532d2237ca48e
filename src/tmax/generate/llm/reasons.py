"""The countable reasons a spec is quarantined by the LLM generator (the report
counts generation failures by these; everything after them is detail)."""

QUARANTINE_REASONS = (
    "missing section",
    "duplicate section",
    "empty section",
    "unclosed section",
    "malformed section",
    "bad file path",
    "malformed task",
    "context length exceeded",
    "Dockerfile check failed",
    "image build failed",
    "initial-state tests failed",
)

"""Task families of the security domain, one folder each: :mod:`auth_log_triage`
(failed SSH logins from auth logs), :mod:`upload_name_filter` (a gate for uploaded file
names), :mod:`sealed_tokens` (probing a stripped binary that seals tokens) and
:mod:`password_audit` (cracking a credential dump with a wordlist). Reference code is
written once as plain functions in each family and pasted
(:func:`tmax.generate.builders.function_sources`) into the tests and the Python reference
programs, so the generator, the oracle and the checks cannot drift apart. They register
in this order, which decides which family renders a spec."""

from tmax.generate.families.security import (  # noqa: F401, I001  (registers them, in this order)
    auth_log_triage,
    upload_name_filter,
    sealed_tokens,
    password_audit,
)

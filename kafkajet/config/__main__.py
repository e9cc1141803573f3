"""`python -m kafkajet.config` prints docs/settings.md (the Makefile diffs the page against it)."""

from kafkajet.config.markdown import settings_page

print(settings_page(), end="")

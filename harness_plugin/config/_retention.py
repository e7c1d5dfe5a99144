"""`[retention]`: how long what `artmem gc` may reclaim is kept, and whether gc may run alone.

[retention]
grace_hours = 24          # unreferenced objects and leftovers younger than this are kept
quarantine_days = 30      # corrupt objects moved aside by fsck --repair are kept this long
dead_letter_days = 30     # undeliverable outbox documents are kept this long
unattended = false        # gc --apply with no terminal (cron, CI) is refused unless true
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from msgspec import Meta

from harness_plugin.config._memory import Section

if TYPE_CHECKING:
    from cas import Retention

HOUR_S = 3_600.0
DAY_S = 86_400.0


class RetentionConfig(Section, frozen=True):
    """The retention policy (see the module docstring); every value bounded, none coerced."""

    grace_hours: Annotated[float, Meta(ge=0, le=8_760)] = 24.0
    quarantine_days: Annotated[float, Meta(ge=0, le=3_650)] = 30.0
    dead_letter_days: Annotated[float, Meta(ge=0, le=3_650)] = 30.0
    unattended: bool = False

    def policy(self) -> Retention:
        """The store's side of the policy (seconds)."""
        from cas import Retention

        return Retention(
            grace_s=self.grace_hours * HOUR_S, quarantine_s=self.quarantine_days * DAY_S
        )

    def view(self) -> dict[str, object]:
        """The policy as `artmem status` shows it."""
        return {
            "grace_hours": self.grace_hours,
            "quarantine_days": self.quarantine_days,
            "dead_letter_days": self.dead_letter_days,
            "unattended": self.unattended,
        }

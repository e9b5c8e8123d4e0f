"""The profanity check shared by ``filter_profanity`` (concepts) and ``import_annotations`` (cues).

better-profanity's word list (and its leetspeak variants), plus ``profanity.extra_words`` and
minus ``profanity.allow_words`` (WinoGAViL §2.1, fn. 4: "We removed words that are potentially
offensive").
"""

from __future__ import annotations

from collections.abc import Iterable

from better_profanity import Profanity


class ProfanityFilter:
    """better-profanity with project-level additions and exceptions (all matched lower-case)."""

    def __init__(self, extra_words: Iterable[str] = (), allow_words: Iterable[str] = ()):
        self.extra = {w.strip().lower() for w in extra_words if w.strip()}
        self.allow = {w.strip().lower() for w in allow_words if w.strip()}
        self._lib = Profanity()
        self._lib.load_censor_words()

    def reason(self, text: str) -> str | None:
        """Why ``text`` is flagged, or None. Checks the whole phrase and each word."""
        t = text.strip().lower()
        if t in self.allow:
            return None
        for w in dict.fromkeys([*t.split(), t]):  # single words first: the reason names the word
            if w in self.allow:
                continue
            if w in self.extra:
                return f"'{w}' is in profanity.extra_words"
            if self._lib.contains_profanity(w):
                return f"better-profanity word list matches '{w}'"
        return None

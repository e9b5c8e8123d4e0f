"""Stage 1, ``ingest_concepts``: SWOW association norms -> concepts + cue->response edges.

Reads the three real input formats (docs/data.md):

- ``SWOW-EN.R100.csv`` (R ``write.csv``): quoted strings, unquoted ``NA`` for missing, the
  tokens "Unknown word" / "No more responses" (not responses). Counts R1 and R123 per
  (cue, response); strength = count / number of valid responses of the cue (R1 or R1..R3).
- ``strength.SWOW-EN.R1.csv`` / ``strength.SWOW-EN.R123.csv``: tab-separated, unquoted,
  columns ``cue, response, R1|R123, N, R1.Strength|R123.Strength``.
- the WinoGAViL release's ``swow.csv``: one row per SWOW-baseline instance; its cue ->
  associations lists become edges (no counts in that file), and its candidates concepts.

Concepts are the SWOW cues (WinoGAViL §2.1 starts "with a corpus of English concepts
obtained from SWOW"); for the release format also every image candidate.

**Stored names.** Every cue, response and candidate is stored in one form:
:func:`gavil.domain.vocabulary.normalize_name` (Unicode NFC, surrounding whitespace trimmed, case-folded)
with ``ingest.lowercase: true`` (the default), Unicode NFC + trimmed with ``false``; so "café"
typed precomposed (NFC) or decomposed (NFD) is one concept either way. Input rows that differ
only before normalisation ("Apple" / "apple") are merged (counts summed) and counted in the
metrics (``merged_by_normalisation``); a row repeated exactly in a strength file is an error.

**Strict reading.** A malformed file stops the stage with :class:`SwowFormatError`: file,
1-based line, column and what is wrong (a duplicate names both lines; a per-cue sum names the
cue and its first line). Errors: a byte that is not UTF-8 (anywhere), a header-only file, a
repeated header line, a wrong field count, a field longer than ``MAX_FIELD_CHARS`` characters
or holding a line break or another control character, an empty or NA cue; in strength files also an empty response, negative counts, N <= 0,
count > N, strength outside [0, 1] or != count / N (``STRENGTH_TOL``), a (cue, response) twice,
two N for one cue, counts summing above N. A cue with no valid response (all NA or
non-responses) is dropped and counted in the metrics (``dropped_cues.no_valid_responses``).

Modules, by role: :mod:`.formats` (headers, limits, detection, the error, the name form),
:mod:`.locate` (the one place a failing row becomes file/line/column/reason), :mod:`.readers`
(the three formats; pyarrow fast path), :mod:`.stage` (:func:`build_tables`, :func:`ingest`,
:func:`run`).
SWOW: De Deyne, Navarro, Perfors, Brysbaert & Storms (2019), Behav. Res. Methods 51:987-1006.
"""

from stages.ingest_concepts.formats import (
    FORMATS,
    MAX_FIELD_CHARS,
    NON_RESPONSES,
    R100_HEADER,
    STRENGTH_HEADERS,
    STRENGTH_TOL,
    WINOGAVIL_SWOW_HEADER,
    SwowFormatError,
    detect_format,
    name_form,
)
from stages.ingest_concepts.readers import Read, read_swow_r100, read_swow_strength, read_winogavil_swow
from stages.ingest_concepts.stage import IngestResult, build_tables, ingest, run

__all__ = [
    "FORMATS",
    "MAX_FIELD_CHARS",
    "NON_RESPONSES",
    "R100_HEADER",
    "STRENGTH_HEADERS",
    "STRENGTH_TOL",
    "WINOGAVIL_SWOW_HEADER",
    "IngestResult",
    "Read",
    "SwowFormatError",
    "build_tables",
    "detect_format",
    "ingest",
    "name_form",
    "read_swow_r100",
    "read_swow_strength",
    "read_winogavil_swow",
    "run",
]

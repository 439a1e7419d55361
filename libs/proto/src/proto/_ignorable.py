r"""Unicode's `Default_Ignorable_Code_Point` set: the code points that render as nothing.

Python's `unicodedata` does not expose the property, and most of the set is not a
format character (which `unicodedata.category` would show as `Cf`): variation
selectors and the combining grapheme joiner are marks, the Hangul fillers letters, the
tag block's reserved code points unassigned. A text can carry any number of them past a
reader who sees nothing, so both renderings (`_render.py`) reveal every one.

The table is DerivedCoreProperties.txt of Unicode 16.0.0, its ranges merged where they
touch (the file splits them by general category). Its count, 4,174, is the file's own
"Total code points". It was checked code point by code point against the `regex`
package's `\p{Default_Ignorable_Code_Point}` (regex 2026.5.9 and 2026.11.19), outside
the gate, since regex is no dependency of ours:

    uv run --with regex python -c "import regex, proto; \
        p = regex.compile(r'\p{Default_Ignorable_Code_Point}'); \
        assert all(bool(p.match(chr(c))) == proto.is_default_ignorable(chr(c)) \
                   for c in range(0x110000))"

A test walks every code point against the table (`tests/security/`).
"""

from __future__ import annotations

import bisect

__all__ = ["DEFAULT_IGNORABLE", "DEFAULT_IGNORABLE_UNICODE", "is_default_ignorable"]

DEFAULT_IGNORABLE_UNICODE = "16.0.0"
"""The Unicode version `DEFAULT_IGNORABLE` is taken from."""

DEFAULT_IGNORABLE: tuple[tuple[int, int], ...] = (
    (0x00AD, 0x00AD),  # SOFT HYPHEN
    (0x034F, 0x034F),  # COMBINING GRAPHEME JOINER
    (0x061C, 0x061C),  # ARABIC LETTER MARK
    (0x115F, 0x1160),  # HANGUL CHOSEONG FILLER, HANGUL JUNGSEONG FILLER
    (0x17B4, 0x17B5),  # KHMER VOWEL INHERENT AQ, AA
    (0x180B, 0x180F),  # MONGOLIAN FREE VARIATION SELECTORS ONE-FOUR, VOWEL SEPARATOR
    (0x200B, 0x200F),  # ZERO WIDTH SPACE .. RIGHT-TO-LEFT MARK
    (0x202A, 0x202E),  # LEFT-TO-RIGHT EMBEDDING .. RIGHT-TO-LEFT OVERRIDE
    (0x2060, 0x206F),  # WORD JOINER .. NOMINAL DIGIT SHAPES (2065 reserved)
    (0x3164, 0x3164),  # HANGUL FILLER
    (0xFE00, 0xFE0F),  # VARIATION SELECTOR-1 .. VARIATION SELECTOR-16
    (0xFEFF, 0xFEFF),  # ZERO WIDTH NO-BREAK SPACE (BOM)
    (0xFFA0, 0xFFA0),  # HALFWIDTH HANGUL FILLER
    (0xFFF0, 0xFFF8),  # reserved
    (0x1BCA0, 0x1BCA3),  # SHORTHAND FORMAT LETTER OVERLAP .. UP STEP
    (0x1D173, 0x1D17A),  # MUSICAL SYMBOL BEGIN BEAM .. END PHRASE
    (0xE0000, 0xE0FFF),  # tags (E0001, E0020-E007F), VARIATION SELECTOR-17..256, reserved
)
"""Inclusive ranges, sorted, disjoint and not touching."""

_STARTS = [start for start, _ in DEFAULT_IGNORABLE]


def is_default_ignorable(char: str) -> bool:
    """Whether `char` (one code point) has Unicode's Default_Ignorable_Code_Point property."""
    point = ord(char)
    i = bisect.bisect_right(_STARTS, point) - 1
    return i >= 0 and point <= DEFAULT_IGNORABLE[i][1]

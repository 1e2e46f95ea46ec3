"""Pre-tokenization as Numba state machines over UTF-8 bytes: the jit twin of ``crayon.reference.pretokenize``.

One hand-written state machine per OpenAI pattern (r50k_base = p50k_base = gpt2, cl100k_base, o200k_base)
gives exactly the spans of ``regex.findall`` with the pattern of ``crayon.patterns``, as byte offsets.

Two passes: ``classify_characters`` decodes the UTF-8 and writes one class entry per byte, looked up in
tables generated from the ``regex`` module by ``tools/gen_unicode_tables.py`` (package data
``crayon/data/unicode_classes.npz``: a two-level table maps a code point to one of a few classes, each with a
word of property bits such as ``LETTER`` or ``WHITESPACE``); ``fill_span_ends`` then runs the pattern's state
machine over those entries.

Invalid UTF-8: a byte that does not start a valid sequence (by Python's strict decoder rules) is one
character with no property bits, like punctuation. The spans are then those of the regex on
``data.decode("utf-8", "surrogateescape")``, whose lone surrogates are likewise neither letters, numbers nor
whitespace. Text encoded from a Python ``str`` is always valid.

Calling from another njit kernel (``data`` a 1-D uint8 array; ``stop`` ends the text for the pattern's
``$`` and lookahead, e.g. at the next special token; ``start`` is a character boundary)::

    tables = unicode_tables()        # checked once; the kernels index them without bounds checks
    pattern_id = PATTERN_IDS["cl100k_base"]
    ends = split_spans_kernel(data, start, stop, pattern_id, tables)  # int64 span ends, allocated

    # or without allocating, in chunks of spans:
    classify_characters(data, start, stop, tables, classes)  # classes: uint8 array, len >= stop
    count = fill_span_ends(classes, start, stop, pattern_id, tables, ends_buffer)  # int64 buffer
    # spans end at ends_buffer[:count]; call again from ends_buffer[count - 1] until it reaches stop

The kernels never read outside ``data[start:stop]`` and ``classes[start:stop]``, whatever the bytes.
"""

from __future__ import annotations

import functools
from importlib import resources

import numpy as np

from crayon.errors import CrayonError, UnsupportedComponentError
from crayon.jit.lazy import njit
from crayon.patterns import pattern_name

R50K, CL100K, O200K = 0, 1, 2
PATTERN_IDS = {"r50k_base": R50K, "p50k_base": R50K, "p50k_edit": R50K, "gpt2": R50K, "cl100k_base": CL100K,
               "o200k_base": O200K}

# Property bits of a character class.
LETTER = 1 << 0
NUMBER = 1 << 1
WHITESPACE = 1 << 2
CR = 1 << 3
LF = 1 << 4
SPACE = 1 << 5
APOSTROPHE = 1 << 6
SLASH = 1 << 7
UPPER_LIKE = 1 << 8  # o200k's [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
LOWER_LIKE = 1 << 9  # o200k's [\p{Ll}\p{Lm}\p{Lo}\p{M}]
FOLDS_TO_SDMT = 1 << 10  # matches (?i:[sdmt]), the one-letter contractions
FOLDS_TO_L = 1 << 11
FOLDS_TO_V = 1 << 12
FOLDS_TO_R = 1 << 13
FOLDS_TO_E = 1 << 14
EXACT_CASE = 1 << 15  # one of the lowercase ASCII letters of the contractions (r50k matches them case-sensitively)
END_OF_TEXT = 1 << 16  # not a class: what the kernels see past the last character

# What each bit means, as regex fragments of the patterns; the table generator evaluates them per code point.
PROPERTY_REGEXES = {
    LETTER: r"\p{L}",
    NUMBER: r"\p{N}",
    WHITESPACE: r"\s",
    CR: r"\r",
    LF: r"\n",
    SPACE: " ",
    APOSTROPHE: "'",
    SLASH: "/",
    UPPER_LIKE: r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]",
    LOWER_LIKE: r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]",
    FOLDS_TO_SDMT: r"(?i:[sdmt])",
    FOLDS_TO_L: r"(?i:l)",
    FOLDS_TO_V: r"(?i:v)",
    FOLDS_TO_R: r"(?i:r)",
    FOLDS_TO_E: r"(?i:e)",
    EXACT_CASE: "[sdmtlvre]",
}

BLOCK_SHIFT = 7  # the two-level table's blocks hold 128 code points
BLOCK_SIZE = 1 << BLOCK_SHIFT
CODE_POINTS = 0x110000
TABLE_FILE = "unicode_classes.npz"

NEWLINE = CR | LF
LETTER_NUMBER_WHITESPACE = LETTER | NUMBER | WHITESPACE

# The entry of each byte in the classes array the second pass reads: class id | (byte length - 1) << LENGTH_SHIFT.
LENGTH_SHIFT = 5
CLASS_MASK = (1 << LENGTH_SHIFT) - 1
CONTINUATION = 1 << 7  # marks the bytes of a character after its first
OTHER_CLASS = 0  # no property bits (np.unique sorts it first); also what invalid bytes get


@functools.cache
def unicode_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The checked character tables ``(block_index, block_classes, class_properties)`` the kernels take."""
    path = resources.files("crayon").joinpath("data", TABLE_FILE)
    try:
        with path.open("rb") as file, np.load(file) as arrays:
            block_index = np.ascontiguousarray(arrays["block_index"], dtype=np.uint16)
            block_classes = np.ascontiguousarray(arrays["block_classes"], dtype=np.uint8)
            properties = np.ascontiguousarray(arrays["class_properties"], dtype=np.uint16)
    except (OSError, KeyError, ValueError) as error:
        raise CrayonError(f"cannot read the pre-tokenizer tables {path}: {error}") from error
    blocks = block_classes.size // BLOCK_SIZE
    if (
        block_index.shape != (CODE_POINTS >> BLOCK_SHIFT,)
        or block_classes.size != blocks * BLOCK_SIZE
        or int(block_index.max()) >= blocks
        or int(block_classes.max()) >= properties.size
        or not 0 < properties.size <= CLASS_MASK + 1
        or properties[OTHER_CLASS] != 0
    ):
        raise CrayonError(f"the pre-tokenizer tables {path} are corrupt; regenerate with tools/gen_unicode_tables.py")
    class_properties = np.zeros(CLASS_MASK + 1, dtype=np.uint16)  # every masked class id is a valid index
    class_properties[: properties.size] = properties
    return block_index, block_classes, class_properties


# Kernel conventions. The kernels below only read arrays that their caller keeps alive, so they are compiled
# without Numba's reference counting (``_nrt=False``): its atomic counts, which Numba fails to prune around
# loops, cost more than the scanning itself. The per-pattern span functions are inlined into the single loop
# that calls them, where LLVM inlines their small helpers.


@njit(cache=True, _nrt=False)
def decode_multibyte(data, pos, stop):
    """(code point, byte length) of the UTF-8 sequence at data[pos] whose lead byte is not ASCII; length 0
    if it is invalid (by the strict rules of Python's decoder) or cut by stop."""
    lead = np.int64(data[pos])
    if 0xC2 <= lead <= 0xDF:
        length, low, high = 2, 0x80, 0xBF
    elif 0xE0 <= lead <= 0xEF:
        length = 3
        low = 0xA0 if lead == 0xE0 else 0x80  # no overlong forms
        high = 0x9F if lead == 0xED else 0xBF  # no surrogates
    elif 0xF0 <= lead <= 0xF4:
        length = 4
        low = 0x90 if lead == 0xF0 else 0x80
        high = 0x8F if lead == 0xF4 else 0xBF  # nothing past U+10FFFF
    else:
        return 0, 0
    if pos + length > stop:
        return 0, 0
    second = np.int64(data[pos + 1])
    if second < low or second > high:
        return 0, 0
    code_point = ((lead & (0xFF >> (length + 1))) << 6) | (second & 0x3F)
    for offset in range(2, length):
        byte = np.int64(data[pos + offset])
        if byte < 0x80 or byte > 0xBF:
            return 0, 0
        code_point = (code_point << 6) | (byte & 0x3F)
    return code_point, length


@njit(cache=True, nogil=True, _nrt=False)
def utf8_error_kernel(data):
    """The offset of the first byte of ``data`` (uint8) that starts no valid UTF-8 sequence (by the strict rules
    of Python's decoder), or -1: where ``bytes(data).decode("utf-8")`` fails, or that it does not."""
    pos, stop = 0, data.shape[0]
    while pos < stop:
        if data[pos] < 0x80:
            pos += 1
            continue
        _, length = decode_multibyte(data, pos, stop)
        if length == 0:
            return pos
        pos += length
    return -1


@njit(cache=True, nogil=True, _nrt=False)
def classify_characters(data, start, stop, tables, classes):
    """First pass: write the class entry of each byte of data[start:stop] into classes[start:stop].

    Every byte of a character gets its class id | (length - 1) << LENGTH_SHIFT, and the bytes after the
    first also get CONTINUATION, so that runs can be scanned byte by byte."""
    if start < 0 or stop > data.shape[0] or stop > classes.shape[0] or start > stop:
        raise ValueError("character range outside the arrays")
    block_index, block_classes, _ = tables
    ascii_classes = np.int64(block_index[0]) << BLOCK_SHIFT
    pos = start
    while pos < stop:
        lead = data[pos]
        if lead < 0x80:  # the fast path: one byte, its class is already its entry
            classes[pos] = block_classes[ascii_classes + lead]
            pos += 1
            continue
        code_point, length = decode_multibyte(data, pos, stop)
        if length == 0:
            classes[pos] = OTHER_CLASS
            pos += 1
            continue
        block = np.int64(block_index[code_point >> BLOCK_SHIFT])
        class_id = block_classes[(block << BLOCK_SHIFT) | (code_point & (BLOCK_SIZE - 1))]
        entry = class_id | ((length - 1) << LENGTH_SHIFT)
        classes[pos] = entry
        for inside in range(pos + 1, pos + length):
            classes[inside] = entry | CONTINUATION
        pos += length


@njit(cache=True, _nrt=False, inline="always")
def _properties_at(classes, pos, stop, class_properties):
    """Property bits of the character that byte pos belongs to; END_OF_TEXT at stop."""
    if pos >= stop:
        return END_OF_TEXT
    return np.int64(class_properties[classes[pos] & CLASS_MASK])


@njit(cache=True, _nrt=False, inline="always")
def _char_at(classes, pos, stop, class_properties):
    """(property bits, byte length) of the character starting at pos; (END_OF_TEXT, 0) at stop."""
    if pos >= stop:
        return END_OF_TEXT, 0
    entry = classes[pos]
    return np.int64(class_properties[entry & CLASS_MASK]), np.int64((entry >> LENGTH_SHIFT) & 3) + 1


@njit(cache=True, _nrt=False)
def _skip_with(classes, pos, stop, class_properties, mask):
    """End of the run of characters from pos that have one of the bits of mask."""
    while pos < stop and _properties_at(classes, pos, stop, class_properties) & mask:
        pos += 1
    return pos


@njit(cache=True, _nrt=False)
def _skip_without(classes, pos, stop, class_properties, mask):
    """End of the run of characters from pos that have none of the bits of mask."""
    while pos < stop and not _properties_at(classes, pos, stop, class_properties) & mask:
        pos += 1
    return pos


@njit(cache=True, _nrt=False)
def _skip_numbers(classes, pos, stop, class_properties):
    """\\p{N}{1,3}: end of at most three number characters from pos."""
    for _ in range(3):
        properties, length = _char_at(classes, pos, stop, class_properties)
        if not properties & NUMBER:
            break
        pos += length
    return pos


@njit(cache=True, _nrt=False)
def _contraction_end(classes, pos, stop, class_properties, required):
    """(?:[sdmt]|ll|ve|re) at pos, just after an apostrophe: its end, or -1. Its letters must carry the bits of
    ``required``: EXACT_CASE for r50k's case-sensitive group, 0 for the (?i:...) groups of cl100k and o200k."""
    first, length = _char_at(classes, pos, stop, class_properties)
    if first & required != required:
        return -1
    if first & FOLDS_TO_SDMT:
        return pos + length
    if first & FOLDS_TO_L:
        wanted = FOLDS_TO_L
    elif first & (FOLDS_TO_V | FOLDS_TO_R):
        wanted = FOLDS_TO_E
    else:
        return -1
    second, second_length = _char_at(classes, pos + length, stop, class_properties)
    return pos + length + second_length if second & wanted and second & required == required else -1


@njit(cache=True, _nrt=False)
def _whitespace_run(classes, start, stop, class_properties):
    """Scan the \\s run at start: (its end, the start of its last character, the end of its last \\r or \\n or -1)."""
    pos = start
    last_start = start
    newline_end = -1
    while pos < stop:
        entry = classes[pos]
        properties = class_properties[entry & CLASS_MASK]
        if not properties & WHITESPACE:
            break
        if properties & NEWLINE:
            newline_end = pos + 1  # CR and LF are one byte
        if not entry & CONTINUATION:
            last_start = pos
        pos += 1
    return pos, last_start, newline_end


@njit(cache=True, _nrt=False, inline="always")
def _r50k_span_end(classes, start, stop, class_properties):
    """'(?:[sdmt]|ll|ve|re)| ?\\p{L}++| ?\\p{N}++| ?[^\\s\\p{L}\\p{N}]++|\\s++$|\\s+(?!\\S)|\\s"""
    first, length = _char_at(classes, start, stop, class_properties)
    if first & APOSTROPHE:
        end = _contraction_end(classes, start + length, stop, class_properties, EXACT_CASE)
        if end != -1:
            return end
    run_start, run_class = start, first
    if first & SPACE:
        following, _ = _char_at(classes, start + length, stop, class_properties)
        if not following & (WHITESPACE | END_OF_TEXT):
            run_start, run_class = start + length, following
    if run_class & LETTER:
        return _skip_with(classes, run_start, stop, class_properties, LETTER)
    if run_class & NUMBER:
        return _skip_with(classes, run_start, stop, class_properties, NUMBER)
    if not run_class & WHITESPACE:
        return _skip_without(classes, run_start, stop, class_properties, LETTER_NUMBER_WHITESPACE)
    end, last_start, _ = _whitespace_run(classes, start, stop, class_properties)
    if end == stop or last_start == start:
        return end  # \s++$, or a single \s
    return last_start  # \s+(?!\S) leaves the last whitespace character to the next span


@njit(cache=True, _nrt=False, inline="always")
def _cl100k_span_end(classes, start, stop, class_properties):
    """'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}++|\\p{N}{1,3}+| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*+|\\s++$
    |\\s*[\\r\\n]|\\s+(?!\\S)|\\s"""
    first, length = _char_at(classes, start, stop, class_properties)
    if first & APOSTROPHE:
        end = _contraction_end(classes, start + length, stop, class_properties, 0)
        if end != -1:
            return end
    if first & LETTER:
        return _skip_with(classes, start, stop, class_properties, LETTER)
    if first & NUMBER:
        return _skip_numbers(classes, start, stop, class_properties)
    following, _ = _char_at(classes, start + length, stop, class_properties)
    if following & LETTER and not first & NEWLINE:
        return _skip_with(classes, start + length, stop, class_properties, LETTER)
    if not first & WHITESPACE:
        symbols_start = start
    elif first & SPACE and not following & (LETTER_NUMBER_WHITESPACE | END_OF_TEXT):
        symbols_start = start + length
    else:
        end, last_start, newline_end = _whitespace_run(classes, start, stop, class_properties)
        if end == stop:
            return end  # \s++$
        if newline_end != -1:
            return newline_end  # \s*[\r\n]
        if last_start == start:
            return end  # \s
        return last_start  # \s+(?!\S)
    end = _skip_without(classes, symbols_start, stop, class_properties, LETTER_NUMBER_WHITESPACE)
    return _skip_with(classes, end, stop, class_properties, NEWLINE)


@njit(cache=True, _nrt=False)
def _o200k_word_end(classes, start, stop, class_properties, upper_only_allowed):
    """End of o200k's [\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+ at start (with the
    backtracking of the regex), else of [\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[...]* if upper_only_allowed, else -1."""
    pos = start
    last_lower_like_end = -1
    properties = _properties_at(classes, pos, stop, class_properties)
    while properties & UPPER_LIKE:
        pos += 1
        if properties & LOWER_LIKE:
            last_lower_like_end = pos  # at the last byte of a character: its end
        properties = _properties_at(classes, pos, stop, class_properties)
    if properties & LOWER_LIKE:
        return _skip_with(classes, pos, stop, class_properties, LOWER_LIKE)
    if last_lower_like_end != -1:
        return last_lower_like_end  # the upper-like run gives back its tail to end on a lower-like character
    if upper_only_allowed and pos > start:
        return pos  # the second alternative; its lower-like run is empty since the first one failed
    return -1


@njit(cache=True, _nrt=False)
def _o200k_suffix_end(classes, pos, stop, class_properties):
    """(?i:'s|'t|'re|'ve|'m|'ll|'d)? after a word ending at pos."""
    properties, length = _char_at(classes, pos, stop, class_properties)
    if properties & APOSTROPHE:
        end = _contraction_end(classes, pos + length, stop, class_properties, 0)
        if end != -1:
            return end
    return pos


@njit(cache=True, _nrt=False, inline="always")
def _o200k_span_end(classes, start, stop, class_properties):
    """The seven alternatives of o200k_base (see crayon.patterns.O200K_BASE)."""
    first, length = _char_at(classes, start, stop, class_properties)
    if first & LETTER:
        end = _o200k_word_end(classes, start, stop, class_properties, True)
        return _o200k_suffix_end(classes, end, stop, class_properties)
    if first & NUMBER:
        return _skip_numbers(classes, start, stop, class_properties)
    if not first & NEWLINE:  # first is [^\r\n\p{L}\p{N}], the optional prefix of a word
        is_mark = first & UPPER_LIKE != 0  # \p{M}: upper- and lower-like but no letter
        end = _o200k_word_end(classes, start + length, stop, class_properties, not is_mark)
        if end == -1 and is_mark:
            end = start + length  # the mark alone is the word, without a prefix
        if end != -1:
            return _o200k_suffix_end(classes, end, stop, class_properties)
    following, _ = _char_at(classes, start + length, stop, class_properties)
    if not first & WHITESPACE:
        symbols_start = start
    elif first & SPACE and not following & (LETTER_NUMBER_WHITESPACE | END_OF_TEXT):
        symbols_start = start + length
    else:
        end, last_start, newline_end = _whitespace_run(classes, start, stop, class_properties)
        if newline_end != -1:
            return newline_end  # \s*[\r\n]+
        if end == stop or last_start == start:
            return end  # \s+(?!\S) at the end of the text, or \s+ of one character
        return last_start  # \s+(?!\S)
    end = _skip_without(classes, symbols_start, stop, class_properties, LETTER_NUMBER_WHITESPACE)
    return _skip_with(classes, end, stop, class_properties, NEWLINE | SLASH)


@njit(cache=True, nogil=True, _nrt=False)
def fill_span_ends(classes, start, stop, pattern_id, tables, ends):
    """Second pass: write the end offsets of the first spans of the text [start, stop) into ``ends`` until it
    is full or the text is split, and return how many were written (continue from the last end written).
    ``classes[start:stop]`` must come from ``classify_characters`` over the same stop."""
    if start < 0 or stop > classes.shape[0] or start > stop:
        raise ValueError("span range outside the classes array")
    if pattern_id != R50K and pattern_id != CL100K and pattern_id != O200K:
        raise ValueError("unknown pre-tokenizer pattern id")
    class_properties = tables[2]
    count = 0
    pos = start
    while pos < stop and count < ends.shape[0]:
        if pattern_id == R50K:
            pos = _r50k_span_end(classes, pos, stop, class_properties)
        elif pattern_id == CL100K:
            pos = _cl100k_span_end(classes, pos, stop, class_properties)
        else:
            pos = _o200k_span_end(classes, pos, stop, class_properties)
        ends[count] = pos
        count += 1
    return count


@njit(cache=True, nogil=True)
def split_spans_kernel(data, start, stop, pattern_id, tables):
    """End offsets (int64) of the spans of the text data[start:stop]; span i is data[ends[i-1]:ends[i]]."""
    if start < 0 or stop > data.shape[0] or start > stop:
        raise ValueError("span range outside the data")
    text = data[start:stop]
    classes = np.empty(text.shape[0], np.uint8)
    classify_characters(text, 0, text.shape[0], tables, classes)
    ends = np.empty(text.shape[0] // 4 + 16, np.int64)
    count = fill_span_ends(classes, 0, text.shape[0], pattern_id, tables, ends)
    while count == ends.shape[0] and ends[count - 1] < text.shape[0]:
        grown = np.empty(2 * count, np.int64)
        grown[:count] = ends
        ends = grown
        count += fill_span_ends(classes, ends[count - 1], text.shape[0], pattern_id, tables, ends[count:])
    return ends[:count] + start


def split_spans(data: np.ndarray, pattern_id: int) -> np.ndarray:
    """End byte offsets (int64) of the pre-tokenizer spans of UTF-8 ``data`` (a 1-D uint8 array)."""
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 1:
        raise TypeError("data must be a 1-D numpy array of uint8")
    if pattern_id not in PATTERN_IDS.values():
        raise ValueError(f"unknown pre-tokenizer pattern id {pattern_id!r}; see PATTERN_IDS")
    read_only = np.ascontiguousarray(data).view()  # one compiled specialization, whoever owns the buffer
    read_only.flags.writeable = False
    return split_spans_kernel(read_only, 0, read_only.shape[0], pattern_id, unicode_tables())


def pattern_id_of(pattern: str) -> int:
    """The kernel id of a pattern given by name (or by its exact regex); UnsupportedComponentError otherwise."""
    name = pattern if pattern in PATTERN_IDS else pattern_name(pattern)
    if name is None:
        raise UnsupportedComponentError(
            f"no jit pre-tokenizer for pattern {pattern!r}; known: {', '.join(PATTERN_IDS)} "
            "(crayon.reference.pretokenize.split handles any regex)"
        )
    return PATTERN_IDS[name]


def jit_pattern_of(tokenizer) -> str | None:
    """The name of the jit pre-tokenizer that splits exactly as ``tokenizer`` does, or None: its pre-tokenizer
    is a known pattern's regex, used as is (no normalizer). An HF file whose pre-tokenizer is such a pattern
    has one too, though not the tiktoken-style ``pattern`` attribute."""
    from crayon.reference.pretokenize import PatternSpanner

    spanner = tokenizer.pretokenizer
    if tokenizer.normalizer is not None or not isinstance(spanner, PatternSpanner):
        return None
    if tokenizer.pattern is not None and spanner.pattern != tokenizer.pattern:
        return None
    return pattern_name(spanner.pattern)


def span_ends(text_bytes: bytes, pattern: str) -> np.ndarray:
    """End byte offsets of the spans of ``text_bytes`` under a named pattern (e.g. ``"cl100k_base"``)."""
    return split_spans(np.frombuffer(text_bytes, dtype=np.uint8), pattern_id_of(pattern))

"""Pre-tokenization as Numba state machines over UTF-8 bytes: the jit twin of ``crayon.reference.pretokenize``.

One hand-written state machine per OpenAI pattern (r50k_base = p50k_base = gpt2, cl100k_base, o200k_base)
gives exactly the spans of ``regex.findall`` with the pattern of ``crayon.patterns``, as byte offsets; cl100k's
machine also splits Llama 3's and Qwen 2's patterns (``crayon.patterns.VARIANT_PATTERNS``), with their whitespace
at the end of a text and their digits.

Two passes: ``classify_characters`` decodes the UTF-8 and writes one class entry per byte, looked up in
tables generated from the ``regex`` module by ``tools/gen_unicode_tables.py`` (package data
``crayon/data/unicode_classes.npz``: a two-level table maps a code point to one of a few classes, each with a
word of property bits such as ``LETTER`` or ``WHITESPACE``); ``fill_span_ends`` then runs the pattern's state
machine over those entries. ``fill_span_ends_fast`` (what the encoding kernels call) first tries the ASCII fast
path at the end of this module, bit masks of the 64 bytes ahead, and classifies characters only from the first
span that path leaves to the state machine.

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
from crayon.jit.lazy import intrinsic, njit
from crayon.patterns import pattern_name, variant_name

R50K, CL100K, O200K, LLAMA3, QWEN2 = 0, 1, 2, 3, 4  # Llama 3 and Qwen 2: cl100k's machine, two variants
PATTERN_IDS = {"r50k_base": R50K, "p50k_base": R50K, "p50k_edit": R50K, "gpt2": R50K, "cl100k_base": CL100K,
               "o200k_base": O200K, "llama3": LLAMA3, "qwen2": QWEN2}

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
def _skip_numbers(classes, pos, stop, class_properties, most):
    """\\p{N}{1,most}: end of at most ``most`` number characters from pos."""
    for _ in range(most):
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
def _cl100k_span_end(classes, start, stop, class_properties, whole_run_at_end, most_digits):
    """'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}++|\\p{N}{1,3}+| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*+|\\s++$
    |\\s*[\\r\\n]|\\s+(?!\\S)|\\s with ``whole_run_at_end`` (cl100k); without it, Llama 3's
    ...|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+, which equals it but at the end of the text; ``most_digits``: 1 for Qwen 2."""
    first, length = _char_at(classes, start, stop, class_properties)
    if first & APOSTROPHE:
        end = _contraction_end(classes, start + length, stop, class_properties, 0)
        if end != -1:
            return end
    if first & LETTER:
        return _skip_with(classes, start, stop, class_properties, LETTER)
    if first & NUMBER:
        return _skip_numbers(classes, start, stop, class_properties, most_digits)
    following, _ = _char_at(classes, start + length, stop, class_properties)
    if following & LETTER and not first & NEWLINE:
        return _skip_with(classes, start + length, stop, class_properties, LETTER)
    if not first & WHITESPACE:
        symbols_start = start
    elif first & SPACE and not following & (LETTER_NUMBER_WHITESPACE | END_OF_TEXT):
        symbols_start = start + length
    else:
        end, last_start, newline_end = _whitespace_run(classes, start, stop, class_properties)
        if end == stop and whole_run_at_end:
            return end  # \s++$
        if newline_end != -1:
            return newline_end  # \s*[\r\n] (\s*[\r\n]+ for Llama 3: the same end)
        if end == stop or last_start == start:
            return end  # \s+(?!\S) at the end of the text, or \s of one character
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
        return _skip_numbers(classes, start, stop, class_properties, 3)
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
    if pattern_id < R50K or pattern_id > QWEN2:
        raise ValueError("unknown pre-tokenizer pattern id")
    class_properties = tables[2]
    count = 0
    pos = start
    while pos < stop and count < ends.shape[0]:
        if pattern_id == R50K:
            pos = _r50k_span_end(classes, pos, stop, class_properties)
        elif pattern_id == O200K:
            pos = _o200k_span_end(classes, pos, stop, class_properties)
        else:
            pos = _cl100k_span_end(classes, pos, stop, class_properties, pattern_id == CL100K,
                                   1 if pattern_id == QWEN2 else 3)
        ends[count] = pos
        count += 1
    return count


# The ASCII fast path. Where the bytes that decide a span are ASCII, its end follows from bit masks of the 64
# bytes from its start (one vector compare per class, no loop over the bytes): a run ends at a count of trailing
# zeros, so a word costs no branch per letter and no mispredicted loop exit. Wherever a byte >= 0x80 could change
# the answer, or the window is too short, the state machines above decide (``fill_span_ends_fast``). ASCII's
# classes, as the tables have them (tests check): \p{L} = [A-Za-z], \p{N} = [0-9], \s = [\t\n\v\f\r ]; every
# other ASCII byte is [^\s\p{L}\p{N}].

WINDOW = 64
_NONE = np.uint64(0)
_ONE = np.uint64(1)


@intrinsic
def ascii_masks(typingctx, data, index):
    """Bit masks of the 64 bytes data[index:index + 64] (bit i: byte index + i): ``(non-ASCII, letter, upper,
    lower, digit, whitespace, newline, apostrophe, slash)``; the caller checks that index + 64 <= len(data)."""
    from llvmlite import ir
    from numba.core import cgutils, types

    def codegen(context, builder, signature, args):
        array_type, index_type = signature.args
        array = context.make_array(array_type)(context, builder, args[0])
        index = context.cast(builder, args[1], index_type, types.intp)
        pointer = cgutils.get_item_pointer(context, builder, array_type, array, [index])
        vector_type = ir.VectorType(ir.IntType(8), WINDOW)
        vector = builder.load(builder.bitcast(pointer, vector_type.as_pointer()), align=1)

        def splat(value):
            return ir.Constant(vector_type, [ir.Constant(ir.IntType(8), value)] * WINDOW)

        def in_range(low, size, of=vector):  # low <= byte < low + size: one unsigned compare
            return builder.icmp_unsigned("<", builder.sub(of, splat(low)), splat(size))

        def equal(value):
            return builder.icmp_unsigned("==", vector, splat(value))

        bits = [
            builder.icmp_signed("<", vector, splat(0)),  # >= 0x80
            in_range(0x61, 26, builder.or_(vector, splat(0x20))),  # [A-Za-z]
            in_range(0x41, 26),
            in_range(0x61, 26),
            in_range(0x30, 10),
            builder.or_(in_range(0x09, 5), equal(0x20)),
            builder.or_(equal(0x0A), equal(0x0D)),
            equal(0x27),
            equal(0x2F),
        ]
        masks = [builder.bitcast(b, ir.IntType(WINDOW)) for b in bits]
        return context.make_tuple(builder, signature.return_type, masks)

    return types.UniTuple(types.uint64, 9)(data, index), codegen


def _zero_count(intrinsic_name: str):
    """The codegen of an LLVM bit count (``llvm.cttz.i64``, ``llvm.ctlz.i64``) of a uint64, 64 for 0."""
    from llvmlite import ir
    from numba.core import cgutils

    def codegen(context, builder, signature, args):
        function = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.IntType(64), [ir.IntType(64), ir.IntType(1)]), intrinsic_name)
        return builder.call(function, [args[0], ir.Constant(ir.IntType(1), 0)])

    return codegen


@intrinsic
def trailing_zeros(typingctx, word):
    """The number of trailing zero bits of a uint64, 64 for 0 (one tzcnt instruction)."""
    from numba.core import types

    return types.int64(types.uint64), _zero_count("llvm.cttz.i64")


@intrinsic
def leading_zeros(typingctx, word):
    """The number of leading zero bits of a uint64, 64 for 0 (one lzcnt instruction)."""
    from numba.core import types

    return types.int64(types.uint64), _zero_count("llvm.ctlz.i64")


@njit(cache=True, _nrt=False, inline="always")
def _run_end(mask, at):
    """The first bit from ``at`` (0 <= at < 64) not set in ``mask``: where a run ends; 64 if it fills the window."""
    rest = ~mask >> np.uint64(at)
    if rest == _NONE:
        return WINDOW
    return at + trailing_zeros(rest)


@njit(cache=True, _nrt=False, inline="always")
def _bit(mask, at):
    return (mask >> np.uint64(at)) & _ONE != _NONE


@njit(cache=True, _nrt=False, inline="always")
def _ascii_contraction_end(data, at):
    """(?i:[sdmt]|ll|ve|re) at data[at] (at + 2 within the window): its end; -1 where it does not match; -2 where
    a byte outside ASCII decides (it may fold to one of the letters)."""
    if data[at] >= 0x80:
        return -2
    first = np.int64(data[at]) | 0x20  # a letter's lower case; no other byte becomes one of these letters
    if first == 0x73 or first == 0x64 or first == 0x6D or first == 0x74:
        return at + 1
    if first != 0x6C and first != 0x76 and first != 0x72:
        return -1
    if data[at + 1] >= 0x80:
        return -2
    second = np.int64(data[at + 1]) | 0x20
    if (first == 0x6C and second == 0x6C) or (first != 0x6C and second == 0x65):
        return at + 2
    return -1


@njit(cache=True, _nrt=False, inline="always")
def _ascii_run(mask, high, at, start):
    """start + the end of the run of ``mask`` from bit ``at``, or -1 where it fills the window or a non-ASCII
    byte follows (which may go on with it)."""
    end = _run_end(mask, at)
    if end == WINDOW or _bit(high, end):
        return -1
    return start + end


@njit(cache=True, _nrt=False, inline="always")
def _ascii_whitespace_end(whitespace, newline, high, at, base):
    """The whitespace alternatives of cl100k and o200k at bit ``at`` (\\s*[\\r\\n], \\s+(?!\\S), \\s): a run that holds a
    newline ends after its last one; else all of a one-character run, else all but its last character. -1 where
    the run fills the window or a non-ASCII byte (U+0085, U+00A0) may go on with it."""
    end = _run_end(whitespace, at)
    if end == WINDOW or _bit(high, end):
        return -1
    newlines = (newline >> np.uint64(at)) & ((_ONE << np.uint64(end - at)) - _ONE)
    if newlines != _NONE:
        return base + at + WINDOW - leading_zeros(newlines)
    return base + (end if end == at + 1 else end - 1)


@njit(cache=True, _nrt=False, inline="always")
def _ascii_symbols_end(masks, at, base, trailing):
    """base + the end of [^\\s\\p{L}\\p{N}]++ from bit ``at`` and the run of ``trailing`` after it, or -1."""
    high, letter, _, _, digit, whitespace, _, _, _ = masks
    end = _run_end(~(letter | digit | whitespace | high), at)
    if end == WINDOW or _bit(high, end):
        return -1
    end = _run_end(trailing, end)
    return -1 if end == WINDOW else base + end


@njit(cache=True, _nrt=False, inline="always")
def _cl100k_ascii_end(data, base, at, masks, most_digits):
    """``_cl100k_span_end`` at bit ``at`` of the window's masks, or -1 (the window never holds the text's end)."""
    high, letter, _, _, digit, whitespace, newline, apostrophe, _ = masks
    if _bit(high, at) or _bit(high, at + 1):
        return -1
    if _bit(apostrophe, at):
        end = _ascii_contraction_end(data, base + at + 1)
        if end != -1:
            return end if end >= 0 else -1
    if _bit(letter, at):
        return _ascii_run(letter, high, at, base)
    if _bit(digit, at):
        return _ascii_digits_end(digit, high, at, base, most_digits)
    if _bit(letter, at + 1) and not _bit(newline, at):
        return _ascii_run(letter, high, at + 1, base)
    if not _bit(whitespace, at):
        return _ascii_symbols_end(masks, at, base, newline)
    if data[base + at] == 0x20 and not _bit(letter | digit | whitespace, at + 1):
        return _ascii_symbols_end(masks, at + 1, base, newline)
    return _ascii_whitespace_end(whitespace, newline, high, at, base)


@njit(cache=True, _nrt=False, inline="always")
def _ascii_digits_end(digit, high, at, base, most):
    """\\p{N}{1,most} from bit ``at``, or -1 where a non-ASCII byte (maybe a digit) follows fewer than ``most``."""
    end = min(_run_end(digit, at), at + most)
    return -1 if end < at + most and _bit(high, end) else base + end


@njit(cache=True, _nrt=False, inline="always")
def _o200k_ascii_word_end(data, base, masks, at):
    """``_o200k_word_end`` and ``_o200k_suffix_end`` from bit ``at`` (a letter) on the window's masks, or -1."""
    high, _, upper, lower, _, _, _, apostrophe, _ = masks
    end = _run_end(upper, at)
    if end == WINDOW or _bit(high, end):
        return -1
    lowers_end = _run_end(lower, end)
    if lowers_end > end:
        if lowers_end == WINDOW or _bit(high, lowers_end):
            return -1
        end = lowers_end
    if not _bit(apostrophe, end):
        return base + end
    if end + 3 > WINDOW:
        return -1
    suffix_end = _ascii_contraction_end(data, base + end + 1)
    if suffix_end == -2:
        return -1
    return suffix_end if suffix_end >= 0 else base + end


@njit(cache=True, _nrt=False, inline="always")
def _o200k_ascii_end(data, base, at, masks):
    """``_o200k_span_end`` at bit ``at`` of the window's masks, or -1."""
    high, letter, _, _, digit, whitespace, newline, _, slash = masks
    if _bit(high, at) or _bit(high, at + 1):
        return -1
    if _bit(letter, at):
        return _o200k_ascii_word_end(data, base, masks, at)
    if _bit(digit, at):
        return _ascii_digits_end(digit, high, at, base, 3)
    if not _bit(newline, at) and _bit(letter, at + 1):
        return _o200k_ascii_word_end(data, base, masks, at + 1)
    if not _bit(whitespace, at):
        return _ascii_symbols_end(masks, at, base, newline | slash)
    if data[base + at] == 0x20 and not _bit(letter | digit | whitespace, at + 1):
        return _ascii_symbols_end(masks, at + 1, base, newline | slash)
    return _ascii_whitespace_end(whitespace, newline, high, at, base)


@njit(cache=True, _nrt=False, inline="always")
def window_span_end(data, base, at, masks, pattern_id):
    """The end of the span at data[base + at] where the ASCII bytes of the window data[base:base + 64] (``masks``:
    ``ascii_masks(data, base)``) decide it, else -1 (always for r50k). ``at`` is at most ``REUSE_LIMIT``."""
    if pattern_id == CL100K or pattern_id == LLAMA3:
        return _cl100k_ascii_end(data, base, at, masks, 3)
    if pattern_id == QWEN2:
        return _cl100k_ascii_end(data, base, at, masks, 1)
    if pattern_id == O200K:
        return _o200k_ascii_end(data, base, at, masks)
    return -1


REUSE_LIMIT = WINDOW - 16  # a window serves the spans that start in its first 48 bytes


@njit(cache=True, nogil=True, _nrt=False)
def fill_span_ends_fast(data, classes, start, stop, pattern_id, tables, ends, classified):
    """``fill_span_ends`` over the bytes: ``window_span_end`` where it answers, else the state machine, whose
    ``classes`` are written (``classify_characters``) from the first span that needs them to ``stop``.
    ``classified`` is where valid classes begin (``stop`` at a text's first call). Returns (count, classified).
    A window's masks serve the spans that start in its first ``REUSE_LIMIT`` bytes, then one at the next span's
    start is read (only where 64 bytes of the text remain)."""
    if start < 0 or stop > data.shape[0] or stop > classes.shape[0] or start > stop:
        raise ValueError("span range outside the arrays")
    count = 0
    pos = start
    batch = 1  # spans asked of the state machine at once: doubled while the fast path keeps failing
    base = -WINDOW  # the window's start: none read yet
    masks = (_NONE, _NONE, _NONE, _NONE, _NONE, _NONE, _NONE, _NONE, _NONE)
    while pos < stop and count < ends.shape[0]:
        end = -1
        if pos - base <= REUSE_LIMIT:
            end = window_span_end(data, base, pos - base, masks, pattern_id)
        if end < 0 and pos != base and pos + WINDOW <= stop:  # a window from this span's start sees further
            base = pos
            masks = ascii_masks(data, base)
            end = window_span_end(data, base, 0, masks, pattern_id)
        if end >= 0:
            ends[count] = end
            count += 1
            pos = end
            batch = 1
            continue
        if pos < classified:
            classify_characters(data, pos, stop, tables, classes)
            classified = pos
        found = fill_span_ends(classes, pos, stop, pattern_id, tables, ends[count : min(count + batch, ends.shape[0])])
        if found == 0:
            break
        count += found
        pos = ends[count - 1]
        batch = 2 * batch
    return count, classified


@njit(cache=True, nogil=True)
def split_spans_kernel(data, start, stop, pattern_id, tables):
    """End offsets (int64) of the spans of the text data[start:stop]; span i is data[ends[i-1]:ends[i]]."""
    if start < 0 or stop > data.shape[0] or start > stop:
        raise ValueError("span range outside the data")
    text = data[start:stop]
    classes = np.empty(text.shape[0], np.uint8)
    ends = np.empty(text.shape[0] // 4 + 16, np.int64)
    count, classified = fill_span_ends_fast(text, classes, 0, text.shape[0], pattern_id, tables, ends, text.shape[0])
    while count == ends.shape[0] and ends[count - 1] < text.shape[0]:
        grown = np.empty(2 * count, np.int64)
        grown[:count] = ends
        ends = grown
        found, classified = fill_span_ends_fast(text, classes, ends[count - 1], text.shape[0], pattern_id, tables,
                                                ends[count:], classified)
        count += found
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
    name = pattern if pattern in PATTERN_IDS else pattern_name(pattern) or variant_name(pattern)
    if name is None:
        raise UnsupportedComponentError(
            f"no jit pre-tokenizer for pattern {pattern!r}; known: {', '.join(PATTERN_IDS)} "
            "(crayon.reference.pretokenize.split handles any regex)"
        )
    return PATTERN_IDS[name]


def jit_pattern_of(tokenizer, *, normalizes_first: bool = False) -> str | None:
    """The name of the jit pre-tokenizer that splits exactly as ``tokenizer`` does, or None: its pre-tokenizer
    is a known pattern's regex, used as is, and it has no normalizer (``normalizes_first``: or one, which the
    caller applies to the text first). An HF file whose pre-tokenizer is such a pattern has one too, though not
    the tiktoken-style ``pattern`` attribute."""
    from crayon.reference.pretokenize import PatternSpanner

    spanner = tokenizer.pretokenizer
    if (tokenizer.normalizer is not None and not normalizes_first) or not isinstance(spanner, PatternSpanner):
        return None
    if tokenizer.pattern is not None and spanner.pattern != tokenizer.pattern:
        return None
    return pattern_name(spanner.pattern) or variant_name(spanner.pattern)


def span_ends(text_bytes: bytes, pattern: str) -> np.ndarray:
    """End byte offsets of the spans of ``text_bytes`` under a named pattern (e.g. ``"cl100k_base"``)."""
    return split_spans(np.frombuffer(text_bytes, dtype=np.uint8), pattern_id_of(pattern))

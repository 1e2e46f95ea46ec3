"""The compiled pre-tokenization regex in Numba: the jit twin of ``crayon.reference.regex_vm``, over UTF-8 bytes.

``program_tables(compile_regex(pattern))`` gives the tuple the kernels take; ``find_spans`` covers a text with
the pattern's leftmost-first matches and the gaps between them, as byte offsets, the same slices as the
reference's ``find_spans`` (which counts characters). ``CompiledSplits`` runs a chain of such splits with HF's
behaviors (``crayon.formats.hf_pretokenize.split_text``), each on the pieces the one before kept: the compiled
form of any pre-tokenizer with ``regex_splits()`` (``crayon.reference.regex_vm.RegexSplit``).

Like ``crayon.jit.pretokenize``, an invalid UTF-8 byte is one character; it is matched as the lone surrogate
``surrogateescape`` decodes it to. Text encoded from a Python ``str`` is always valid.
"""

from __future__ import annotations

import functools
import warnings
from typing import Sequence

import numpy as np

from crayon.errors import UnsupportedComponentError
from crayon.jit.lazy import njit
from crayon.jit.pretokenize import decode_multibyte
from crayon.jit.whitespace_normalizer import metaspace_pieces
from crayon.reference.regex_vm import (
    ANY_START,
    ASSERT,
    ATOMIC,
    BLOCK_SHIFT,
    BLOCK_SIZE,
    CLASS,
    CUT,
    JUMP,
    LOOK,
    LOOK_END,
    MATCH,
    RUN,
    RUN_POSSESSIVE,
    SPLIT,
    SPLIT_BEHAVIORS,
    UNBOUNDED,
    Alt,
    CharSet,
    Look,
    MetaspaceSplit,
    Program,
    RegexSplit,
    Seq,
    compile_regex,
    parse,
)

# Backtracking entries, as in the reference.
BRANCH, RUN_BACK, ATOMIC_BARRIER, LOOK_BARRIER, NEGATIVE_LOOK_BARRIER = range(5)
CONTINUATION = 1 << 10  # in a byte's entry: not the first byte of its character
LENGTH_SHIFT = 8
CLASS_MASK = 0xFF
NEED_STACK = -2
REMOVED, ISOLATED, MERGED_WITH_PREVIOUS, MERGED_WITH_NEXT, CONTIGUOUS = (SPLIT_BEHAVIORS.index(name) for name in (
    "removed", "isolated", "merged_with_previous", "merged_with_next", "contiguous"))


def program_tables(program: Program) -> tuple:
    """The tuple of arrays the kernels take: (block_index, block_classes, class_bits, can_start, instructions
    (``without_needless_backtracking``), guards, invalid_class as a one-element array)."""
    arrays = (program.block_index, program.block_classes, program.class_bits, program.can_start,
              without_needless_backtracking(program.instructions), program.guards,
              np.array([program.invalid_class], np.int64))
    views = []
    for array in arrays:
        view = np.ascontiguousarray(array).view()
        view.flags.writeable = False
        views.append(view)
    return tuple(views)


def without_needless_backtracking(instructions: np.ndarray) -> np.ndarray:
    """The same program with less work per match: a JUMP that leads (through JUMPs) to MATCH is a MATCH, and a
    RUN right before MATCH is possessive (nothing after it can fail, so no shorter run is ever tried)."""
    code = np.array(instructions, copy=True)
    for pc in range(len(code)):
        target = pc
        while code[target, 0] == JUMP:
            target = code[target, 1]
        if code[target, 0] == MATCH:
            code[pc] = code[target]
    for pc in range(len(code) - 1):
        if code[pc, 0] == RUN and code[pc + 1, 0] == MATCH:
            code[pc, 0] = RUN_POSSESSIVE
    return code


@njit(cache=True, nogil=True, _nrt=False)
def classify_bytes(data, start, stop, tables, entries):
    """Write each byte's entry into entries[start:stop]: its character's class | (length - 1) << LENGTH_SHIFT,
    and CONTINUATION on the bytes after a character's first."""
    block_index, block_classes = tables[0], tables[1]
    invalid_class = tables[6][0]
    pos = start
    while pos < stop:
        lead = data[pos]
        if lead < 0x80:
            entries[pos] = block_classes[(np.int64(block_index[0]) << BLOCK_SHIFT) | lead]
            pos += 1
            continue
        code_point, length = decode_multibyte(data, pos, stop)
        if length == 0:
            entries[pos] = invalid_class
            pos += 1
            continue
        block = np.int64(block_index[code_point >> BLOCK_SHIFT])
        entry = np.int64(block_classes[(block << BLOCK_SHIFT) | (code_point & (BLOCK_SIZE - 1))])
        entry |= (length - 1) << LENGTH_SHIFT
        entries[pos] = entry
        for inside in range(pos + 1, pos + length):
            entries[inside] = entry | CONTINUATION
        pos += length


@njit(cache=True, _nrt=False, inline="always")
def _char_length(entries, pos):
    return ((np.int64(entries[pos]) >> LENGTH_SHIFT) & 3) + 1


@njit(cache=True, _nrt=False, inline="always")
def _in_set(entries, pos, class_bits, bit):
    return (class_bits[entries[pos] & CLASS_MASK] >> np.uint64(bit)) & np.uint64(1)


@njit(cache=True, _nrt=False)
def _assertion_holds(kind, data, start, stop, pos):
    if kind == 0:
        return pos == start
    if kind == 1:
        return pos == stop
    if kind == 2:
        return pos == stop or (pos == stop - 1 and data[pos] == 10)
    if kind == 3:
        return pos == start or data[pos - 1] == 10
    return pos == stop or data[pos] == 10


@njit(cache=True, _nrt=False, inline="always")
def match_at(data, entries, start, stop, pos, tables, stack):
    """End of the match at byte pos of the text data[start:stop], -1 if none, NEED_STACK if ``stack`` (int64,
    shape (n, 4)) is too small."""
    class_bits, code, guards = tables[2], tables[4], tables[5]
    depth = 0
    pc = 0
    while True:
        op = code[pc, 0]
        a = np.int64(code[pc, 1])
        ok = True
        if op == CLASS:
            ok = pos < stop and _in_set(entries, pos, class_bits, a) != 0
            if ok:
                pos += _char_length(entries, pos)
            pc += 1
        elif op == RUN or op == RUN_POSSESSIVE:
            low, high = np.int64(code[pc, 2]), np.int64(code[pc, 3])
            count = 0
            run_start = pos
            min_end = pos
            while pos < stop and (high == UNBOUNDED or count < high) and _in_set(entries, pos, class_bits, a) != 0:
                pos += _char_length(entries, pos)
                count += 1
                if count == low:
                    min_end = pos
            ok = count >= low
            if ok and op == RUN and count > low:
                if depth == stack.shape[0]:
                    return NEED_STACK
                stack[depth, 0], stack[depth, 1], stack[depth, 2], stack[depth, 3] = RUN_BACK, pc + 1, pos, min_end
                depth += 1
            if low == 0:
                min_end = run_start
            pc += 1
        elif op == SPLIT:
            bits = class_bits[entries[pos] & CLASS_MASK] if pos < stop else np.uint64(0)
            first = guards[pc, 0] == ANY_START or bits & guards[pc, 0] != 0
            second = guards[pc, 1] == ANY_START or bits & guards[pc, 1] != 0
            if first and second:
                if depth == stack.shape[0]:
                    return NEED_STACK
                stack[depth, 0], stack[depth, 1], stack[depth, 2] = BRANCH, code[pc, 2], pos
                depth += 1
            ok = first or second
            pc = a if first else np.int64(code[pc, 2])
        elif op == JUMP:
            pc = a
        elif op == ATOMIC or op == LOOK:
            if depth == stack.shape[0]:
                return NEED_STACK
            kind = ATOMIC_BARRIER if op == ATOMIC else (NEGATIVE_LOOK_BARRIER if a else LOOK_BARRIER)
            stack[depth, 0], stack[depth, 1], stack[depth, 2] = kind, code[pc, 2], pos
            depth += 1
            pc += 1
        elif op == CUT or op == LOOK_END:
            depth -= 1
            while stack[depth, 0] < ATOMIC_BARRIER:
                depth -= 1
            if op == LOOK_END:
                ok = a == 0
                pos = stack[depth, 2]
            pc += 1
        elif op == ASSERT:
            ok = _assertion_holds(a, data, start, stop, pos)
            pc += 1
        else:  # MATCH
            return pos
        while not ok:
            if depth == 0:
                return -1
            depth -= 1
            kind = stack[depth, 0]
            pc, pos = stack[depth, 1], stack[depth, 2]
            if kind == BRANCH:
                ok = True
            elif kind == RUN_BACK:
                pos -= 1
                while entries[pos] & CONTINUATION:
                    pos -= 1
                if pos > stack[depth, 3]:
                    stack[depth, 2] = pos
                    depth += 1
                ok = True
            elif kind == NEGATIVE_LOOK_BARRIER:
                ok = True


@njit(cache=True, nogil=True, _nrt=False)
def fill_slices(data, entries, start, stop, pos, tables, stack, ends, is_match):
    """Write the slices of data[start:stop] from pos on (a character boundary, not inside a gap) into ``ends``
    and ``is_match`` until they are full or the text is covered; returns how many, or NEED_STACK."""
    can_start = tables[3]
    count = 0
    gap_start = pos
    while pos < stop and count + 2 <= ends.shape[0]:
        end = -1
        if can_start[entries[pos] & CLASS_MASK]:
            end = match_at(data, entries, start, stop, pos, tables, stack)
            if end == NEED_STACK:
                return NEED_STACK if count == 0 else count
        if end <= pos:
            pos += _char_length(entries, pos)
            continue
        if gap_start < pos:
            ends[count], is_match[count] = pos, 0
            count += 1
        ends[count], is_match[count] = end, 1
        count += 1
        gap_start = pos = end
    if pos >= stop and gap_start < stop and count < ends.shape[0]:
        ends[count], is_match[count] = stop, 0
        count += 1
    return count


@njit(cache=True, nogil=True)
def piece_slices(data, entries, start, stop, tables, stack, slice_ends, slice_match):
    """Cover the piece data[start:stop] with slices into slice_ends/slice_match (room for stop - start + 1);
    returns (count, the stack, grown if a match needed more)."""
    count = 0
    pos = start
    while pos < stop:
        found = fill_slices(data, entries, start, stop, pos, tables, stack, slice_ends[count:], slice_match[count:])
        if found == NEED_STACK:
            stack = np.empty((2 * stack.shape[0], 4), np.int64)
            continue
        count += found
        pos = slice_ends[count - 1]
    return count, stack


@njit(cache=True, nogil=True)
def find_spans_kernel(data, tables):
    """(ends, is_match) of the slices covering the whole text ``data``."""
    entries = np.empty(data.shape[0], np.uint16)
    classify_bytes(data, 0, data.shape[0], tables, entries)
    ends = np.empty(data.shape[0] + 1, np.int64)
    is_match = np.empty(data.shape[0] + 1, np.uint8)
    count, _ = piece_slices(data, entries, 0, data.shape[0], tables, np.empty((64, 4), np.int64), ends, is_match)
    return ends[:count], is_match[:count]


@njit(cache=True, nogil=True)
def split_pieces(data, piece_ends, piece_kept, tables, behavior, invert):
    """One HF split step on the kept pieces (piece i is data[piece_ends[i - 1]:piece_ends[i]], from 0): the new
    (ends, kept) of the whole text; pieces not kept stay as they are."""
    entries = np.empty(data.shape[0], np.uint16)
    classify_bytes(data, 0, data.shape[0], tables, entries)
    out_ends = np.empty(data.shape[0] + piece_ends.shape[0] + 1, np.int64)
    out_kept = np.empty(out_ends.shape[0], np.uint8)
    stack = np.empty((64, 4), np.int64)
    n = 0
    start = 0
    for piece in range(piece_ends.shape[0]):
        stop = piece_ends[piece]
        if not piece_kept[piece]:
            out_ends[n], out_kept[n] = stop, 0
            n += 1
        else:  # the slices go where the pieces they make go: apply_behavior never writes past what it has read
            count, stack = piece_slices(data, entries, start, stop, tables, stack, out_ends[n:], out_kept[n:])
            if invert:
                for i in range(n, n + count):
                    out_kept[i] = 1 - out_kept[i]
            n = apply_behavior(out_ends[n:], out_kept[n:], count, behavior, out_ends, out_kept, n)
        start = stop
    return out_ends[:n], out_kept[:n]


@njit(cache=True, nogil=True)
def kept_text(data, ends, kept):
    """(the bytes of the kept pieces, one after the other; their ends in it)."""
    out = np.empty(data.shape[0], np.uint8)
    out_ends = np.empty(ends.shape[0], np.int64)
    n = 0
    count = 0
    start = 0
    for i in range(ends.shape[0]):
        if kept[i] and ends[i] > start:
            out[n : n + ends[i] - start] = data[start : ends[i]]
            n += ends[i] - start
            out_ends[count] = n
            count += 1
        start = ends[i]
    return out[:n], out_ends[:count]


# a character's action in a fused run of one-character splits (``CharacterSplits``)
IN_WORD, REMOVE_CHARACTER, ISOLATE_CHARACTER, BREAK_BEFORE, BREAK_AFTER = range(5)


@njit(cache=True, nogil=True)
def split_characters(data, piece_ends, piece_kept, actions, invalid_action):
    """One-character splits fused (``CharacterSplits``) on the kept pieces: a character whose action (``actions``
    by code point, ``invalid_action`` for an invalid byte) is REMOVE_CHARACTER becomes a piece not kept, one whose
    action is ISOLATE_CHARACTER a piece of its own, one whose action is BREAK_BEFORE (BREAK_AFTER) starts (ends) a
    piece, the runs of the other characters are pieces; the new (ends, kept) of the whole text, as
    ``split_pieces`` gives them for the splits one after the other."""
    out_ends = np.empty(data.shape[0] + piece_ends.shape[0] + 1, np.int64)
    out_kept = np.empty(out_ends.shape[0], np.uint8)
    n = 0
    start = 0
    for piece in range(piece_ends.shape[0]):
        stop = piece_ends[piece]
        if not piece_kept[piece]:
            out_ends[n], out_kept[n] = stop, 0
            n += 1
            start = stop
            continue
        run_start = start
        pos = start
        while pos < stop:
            lead = data[pos]
            if lead < 0x80:
                action, length = actions[lead], 1
            else:
                code_point, length = decode_multibyte(data, pos, stop)
                if length == 0:
                    action, length = invalid_action, 1
                else:
                    action = actions[code_point]
            if action == BREAK_BEFORE:
                if pos > run_start:
                    out_ends[n], out_kept[n] = pos, 1
                    n += 1
                run_start = pos
            elif action == BREAK_AFTER:
                out_ends[n], out_kept[n] = pos + length, 1
                n += 1
                run_start = pos + length
            elif action != IN_WORD:
                if pos > run_start:
                    out_ends[n], out_kept[n] = pos, 1
                    n += 1
                out_ends[n], out_kept[n] = pos + length, 1 if action == ISOLATE_CHARACTER else 0
                n += 1
                run_start = pos + length
            pos += length
        if stop > run_start:
            out_ends[n], out_kept[n] = stop, 1
            n += 1
        start = stop
    return out_ends[:n], out_kept[:n]


@njit(cache=True, nogil=True, _nrt=False)
def longest_slice(ends):
    """The length of the longest slice data[ends[i - 1]:ends[i]] (from 0)."""
    longest = 0
    start = 0
    for end in ends:
        longest = max(longest, end - start)
        start = end
    return longest


@njit(cache=True, nogil=True, _nrt=False)
def text_token_offsets(tokens, token_lengths, text_ends, offsets):
    """Cut the tokens of texts that follow one another (text i's bytes end at text_ends[i]; a token never crosses
    a text) into the texts: offsets[i + 1] = how many tokens end within the first i + 1 texts. Returns False,
    writing nothing more, at a token outside ``token_lengths``."""
    n = 0
    done = 0
    offsets[0] = 0
    for i in range(text_ends.shape[0]):
        while n < tokens.shape[0]:
            if tokens[n] >= token_lengths.shape[0]:
                return False
            if done + token_lengths[tokens[n]] > text_ends[i]:
                break
            done += token_lengths[tokens[n]]
            n += 1
        offsets[i + 1] = n
    return True


@njit(cache=True, nogil=True, _nrt=False)
def apply_behavior(ends, is_match, count, behavior, out_ends, out_kept, n):
    """HF's split behaviors (``split_text``) on the ``count`` slices of one piece: append the resulting pieces
    to out_ends/out_kept from n (removed text is written as a piece not kept); returns the new n."""
    i = 0
    while i < count:
        if behavior == CONTIGUOUS:  # runs of matches, runs of non-matches
            while i + 1 < count and is_match[i + 1] == is_match[i]:
                i += 1
        elif behavior == MERGED_WITH_PREVIOUS:  # a match joins the non-match before it
            if i + 1 < count and not is_match[i] and is_match[i + 1]:
                i += 1
        elif behavior == MERGED_WITH_NEXT:  # a match joins the non-match after it
            if i + 1 < count and is_match[i] and not is_match[i + 1]:
                i += 1
        out_ends[n] = ends[i]
        out_kept[n] = 0 if behavior == REMOVED and is_match[i] else 1
        n += 1
        i += 1
    return n


def find_spans(data: np.ndarray, program: Program) -> tuple[np.ndarray, np.ndarray]:
    """(ends, is_match) of the slices covering UTF-8 ``data`` (a 1-D uint8 array): the byte offsets of the
    reference's ``find_spans``."""
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 1:
        raise TypeError("data must be a 1-D numpy array of uint8")
    return find_spans_kernel(_read_only(data), program_tables(program))


def _read_only(data: np.ndarray) -> np.ndarray:
    view = np.ascontiguousarray(data).view()  # one compiled specialization, whoever owns the buffer
    view.flags.writeable = False
    return view


def matches_one_character(pattern: str, multiline: bool = False) -> bool:
    """Whether every match of the pattern is one character, found by that character alone: a character set, an
    alternation of such patterns, or such a pattern after lookaheads that are."""
    def one_character(node) -> bool:
        if isinstance(node, CharSet):
            return True
        if isinstance(node, Alt):
            return bool(node.options) and all(map(one_character, node.options))
        if isinstance(node, Seq) and node.items:
            *looks, last = node.items
            return all(isinstance(look, Look) and one_character(look.item) for look in looks) and one_character(last)
        return False

    return one_character(parse(pattern, multiline=multiline))


class CharacterSplits:
    """Splits whose patterns match one character (``matches_one_character``) as one pass (``split_characters``):
    consecutive ones that remove or isolate their matches (a character is removed if a split that matches it
    removes, isolated if one matches it and none removes, else part of a run), or one that merges its matches
    with the next or the previous text (a match starts or ends a piece). ``tables`` holds the action per code
    point and for an invalid UTF-8 byte (matched by the programs' class of invalid bytes)."""

    FUSED_BEHAVIORS = ("removed", "isolated")
    BEHAVIORS = (*FUSED_BEHAVIORS, "merged_with_next", "merged_with_previous")

    def __init__(self, splits: Sequence[RegexSplit]):
        self.splits = tuple(splits)
        for split in self.splits:  # a pattern the compiler refuses is refused here, not at the first encode
            compile_regex(split.pattern, multiline=split.multiline)

    @property
    def tables(self) -> tuple[np.ndarray, int]:
        """(actions, invalid_action), built on first use (once for equal splits)."""
        return _character_tables(self.splits)

    @classmethod
    def takes(cls, split) -> bool:
        return (isinstance(split, RegexSplit) and split.behavior in cls.BEHAVIORS and not split.invert
                and matches_one_character(split.pattern, split.multiline))

    def fuses_with(self, split: RegexSplit) -> bool:
        """Whether ``split`` (one ``takes``) can join these splits' pass."""
        return all(behavior in self.FUSED_BEHAVIORS for behavior in (split.behavior, self.splits[-1].behavior))


@functools.lru_cache(maxsize=16)
def _character_tables(splits: tuple[RegexSplit, ...]) -> tuple[np.ndarray, int]:
    actions = np.zeros(0x110000, np.uint8)
    invalid_action = IN_WORD
    for split in splits:  # removing wins over isolating, whichever comes first
        matched, invalid_matched = _matched_characters(compile_regex(split.pattern, multiline=split.multiline))
        if split.behavior in ("merged_with_next", "merged_with_previous"):  # a split alone (``fuses_with``)
            action = BREAK_BEFORE if split.behavior == "merged_with_next" else BREAK_AFTER
            actions[matched] = action
            invalid_action = action if invalid_matched else invalid_action
        elif split.behavior == "removed":
            actions[matched] = REMOVE_CHARACTER
            invalid_action = REMOVE_CHARACTER if invalid_matched else invalid_action
        else:
            actions[matched & (actions == IN_WORD)] = ISOLATE_CHARACTER
            invalid_action = ISOLATE_CHARACTER if invalid_matched and invalid_action == IN_WORD else invalid_action
    actions.flags.writeable = False
    return actions, invalid_action


def _matched_characters(program: Program) -> tuple[np.ndarray, bool]:
    """(whether each code point is a match of the one-character ``program``, whether an invalid byte is): the
    program sees a character's class alone, so one character of each class is matched, by ``find_spans``."""
    code_points = np.arange(0x110000, dtype=np.int64)
    blocks = program.block_index[code_points >> BLOCK_SHIFT].astype(np.int64)
    classes = program.block_classes[(blocks << BLOCK_SHIFT) | (code_points & (BLOCK_SIZE - 1))].astype(np.int64)
    classes &= CLASS_MASK
    not_surrogate = (code_points < 0xD800) | (code_points > 0xDFFF)  # never decoded from UTF-8
    found, first = np.unique(classes[not_surrogate], return_index=True)
    tables = program_tables(program)

    def is_match(encoded: bytes) -> bool:
        ends, matched = find_spans_kernel(_read_only(np.frombuffer(encoded, np.uint8)), tables)
        return len(ends) == 1 and bool(matched[0]) and ends[0] == len(encoded)

    class_matched = np.zeros(CLASS_MASK + 1, bool)
    for klass, code_point in zip(found.tolist(), code_points[not_surrogate][first].tolist()):
        class_matched[klass] = is_match(chr(code_point).encode("utf-8"))
    return class_matched[classes] & not_surrogate, is_match(b"\xff")


def normalized_texts(normalizer, texts: Sequence[str]) -> Sequence[str]:
    """The texts after ``normalizer`` (None: as they are), at once where it has ``normalize_batch`` (HF's
    normalizers)."""
    if normalizer is None:
        return texts
    normalize_batch = getattr(normalizer, "normalize_batch", None)
    return normalize_batch(texts) if normalize_batch is not None else [normalizer(text) for text in texts]


class CompiledSplits:
    """A pre-tokenizer as compiled steps, after an optional space put before text that does not start with one
    (HF ByteLevel's ``add_prefix_space``): regex splits ``(program, behavior, invert)``, each on the pieces the
    one before kept, and Metaspace rewrites (``MetaspaceSplit``, ``crayon.jit.whitespace_normalizer``), which
    change the text: ``run`` takes them, ``split`` and calling refuse them."""

    def __init__(self, steps: list[tuple[Program, str, bool] | MetaspaceSplit], *, add_prefix_space: bool = False):
        self.steps = [step if isinstance(step, (MetaspaceSplit, CharacterSplits)) else
                      (program_tables(step[0]), SPLIT_BEHAVIORS.index(step[1]), step[2]) for step in steps]
        self.add_prefix_space = add_prefix_space
        self.rewrites_text = any(isinstance(step, MetaspaceSplit) for step in self.steps)

    def prepare(self, text: str) -> bytes:
        """The bytes the splits run on."""
        if self.add_prefix_space and text and not text.startswith(" "):
            text = " " + text
        return text.encode("utf-8")

    def prepare_batch(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(bytes, text ends): the texts as ``prepare`` gives each, one after the other (read-only)."""
        if self.add_prefix_space:
            texts = [text if not text or text.startswith(" ") else " " + text for text in texts]
        encoded = list(map(str.encode, texts))
        text_ends = np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded)))
        return _read_only(np.frombuffer(b"".join(encoded), np.uint8)), text_ends

    def run(self, data: np.ndarray, text_ends: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(bytes, span ends, kept, text ends) of the texts data[text_ends[i - 1]:text_ends[i]] after every step:
        the bytes are the rewritten text, spans not kept included; text i now ends at the new text ends[i]."""
        ends, kept = text_ends.astype(np.int64), np.ones(len(text_ends), np.uint8)
        text_ends = ends
        for step in self.steps:
            if isinstance(step, MetaspaceSplit):
                pieces_before = np.searchsorted(ends, text_ends, side="right")
                data, ends, kept, mapped = metaspace_pieces(data, ends, kept, step.replacement, step.prepend,
                                                            step.split)
                data = _read_only(data)
                text_ends = np.concatenate(([0], mapped))[pieces_before]
            else:
                ends, kept = self._split(data, ends, kept, step)
        return data, ends, kept, text_ends

    @staticmethod
    def _split(data: np.ndarray, ends: np.ndarray, kept: np.ndarray, step) -> tuple[np.ndarray, np.ndarray]:
        if isinstance(step, CharacterSplits):
            return split_characters(data, ends, kept, *step.tables)
        return split_pieces(data, ends, kept, *step)

    def split(self, data: np.ndarray, piece_ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(ends, kept) of the spans of the pieces data[piece_ends[i - 1]:piece_ends[i]] (each a text)."""
        if self.rewrites_text:
            raise TypeError("these steps rewrite the text: use run()")
        ends, kept = piece_ends.astype(np.int64), np.ones(len(piece_ends), np.uint8)
        for step in self.steps:
            ends, kept = self._split(data, ends, kept, step)
        return ends, kept

    def __call__(self, encoded: bytes) -> tuple[np.ndarray, np.ndarray]:
        """(data, span ends): the bytes of the spans, one after the other, and where each ends."""
        data = _read_only(np.frombuffer(encoded, np.uint8))
        data, ends, kept, _ = self.run(data, np.array([len(data)] if len(data) else [], np.int64))
        if not kept.all():
            data, ends = kept_text(data, ends, kept)
            data = _read_only(data)
        return data, ends


_WARNED: set[str] = set()


def compiled_splits_of(pretokenizer, *, rewrites: bool = False) -> CompiledSplits | None:
    """The compiled form of a pre-tokenizer that has ``regex_splits()`` (a pattern, an HF pipeline of regex
    splits, ByteLevel and, where the caller takes rewritten text (``rewrites``), Metaspace; see ``RegexSplit``),
    or None, with a one-time warning naming the reason, where it has none: the engine then runs the
    pre-tokenizer itself in Python (never different spans)."""
    try:
        describe = getattr(pretokenizer, "regex_splits", None)
        if describe is None:
            raise UnsupportedComponentError(f"pre-tokenizer {pretokenizer!r} has no regex form")
        splits, add_prefix_space = describe()
        if not rewrites and any(isinstance(split, MetaspaceSplit) for split in splits):
            raise UnsupportedComponentError("Metaspace before a byte-level model (its compiled form takes no "
                                            "rewritten text)")
        steps = []
        for split in splits:
            if CharacterSplits.takes(split):  # one pass for a run of one-character splits
                if steps and isinstance(steps[-1], CharacterSplits) and steps[-1].fuses_with(split):
                    steps[-1] = CharacterSplits([*steps[-1].splits, split])
                else:
                    steps.append(CharacterSplits([split]))
            else:
                steps.append(split if isinstance(split, MetaspaceSplit) else
                             (compile_regex(split.pattern, multiline=split.multiline), split.behavior, split.invert))
        return CompiledSplits(steps, add_prefix_space=add_prefix_space)
    except UnsupportedComponentError as error:
        if str(error) not in _WARNED:
            _WARNED.add(str(error))
            warnings.warn(f"the jit engine runs this pre-tokenizer in Python (exact, slower): {error}", stacklevel=3)
        return None

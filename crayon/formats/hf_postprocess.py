"""HF post-processors: the ids (BOS/EOS, CLS/SEP) that ``encode(text, add_special_tokens=True)`` puts around a
text or a pair of texts, and the type ids of each position, as HF tokenizers' ``Encoding.ids`` and
``Encoding.type_ids``.

TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel (no ids) and Sequence of these with at most
one that adds ids. Without ``add_special_tokens`` (or without a post-processor) the ids are the text's then the
pair's, with type ids 0 and 1 (a template's type ids where there is one). ByteLevel's and RobertaProcessing's
``trim_offsets`` move character offsets off the spaces at a token's ends (``trim_offsets``).
"""

from __future__ import annotations

from crayon.errors import UnsupportedComponentError

__all__ = ["PostProcessor", "post_processor_from_hf", "plain_process"]

# A template is a list of pieces: ("A" or "B", type id) for a text, (ids, type id) for special tokens.
Template = list[tuple[str | tuple[int, ...], int]]


class PostProcessor:
    """Templates for one text and for a pair, read from a ``tokenizer.json``'s ``post_processor`` (kept as
    ``spec``, which ``to_hf`` writes back)."""

    def __init__(self, single: Template, pair: Template, spec: dict):
        self.single, self.pair, self.spec = single, pair, spec
        self.offset_trims = _offset_trims(spec)  # add_prefix_space of each processor that trims offsets

    def trim_offsets(self, tokens: list[str], offsets: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """HF's ``process_offsets``: each token's span loses the spaces (``Ġ`` or whitespace) at its ends, except a
        single leading one of the first token where the processor adds a prefix space."""
        for add_prefix_space in self.offset_trims:
            offsets = [_trimmed(token, start, end, add_prefix_space and (i == 0 or start == 0))
                       for i, (token, (start, end)) in enumerate(zip(tokens, offsets))]
        return offsets

    def process(self, ids: list[int], pair_ids: list[int] | None = None, *,
                add_special_tokens: bool = True) -> tuple[list[int], list[int]]:
        """(ids, type ids) of a text's ids, or of a pair's, as HF's post-processing gives them."""
        texts = {"A": ids, "B": pair_ids}
        out_ids: list[int] = []
        type_ids: list[int] = []
        for piece, type_id in self.single if pair_ids is None else self.pair:
            if isinstance(piece, str):
                out_ids.extend(texts[piece])
                type_ids.extend([type_id] * len(texts[piece]))
            elif add_special_tokens:
                out_ids.extend(piece)
                type_ids.extend([type_id] * len(piece))
        return out_ids, type_ids

    def template(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The ids put before and after a single text."""
        text_at = next(i for i, (piece, _) in enumerate(self.single) if isinstance(piece, str))
        before = tuple(token for piece, _ in self.single[:text_at] for token in piece)
        after = tuple(token for piece, _ in self.single[text_at + 1 :] for token in piece)
        return before, after

    def to_hf(self) -> dict:
        return self.spec

    def __repr__(self) -> str:
        return f"PostProcessor({self.spec.get('type')!r}, single={self.single})"


def plain_process(ids: list[int], pair_ids: list[int] | None = None) -> tuple[list[int], list[int]]:
    """(ids, type ids) without a post-processor: the text's ids (type 0), then the pair's (type 1)."""
    if pair_ids is None:
        return list(ids), [0] * len(ids)
    return [*ids, *pair_ids], [0] * len(ids) + [1] * len(pair_ids)


_PLAIN: tuple[Template, Template] = ([("A", 0)], [("A", 0), ("B", 1)])


def post_processor_from_hf(spec: dict | None) -> PostProcessor | None:
    """The post-processor of a ``tokenizer.json``'s ``post_processor`` entry; None where it adds no ids."""
    if spec is None:
        return None
    single, pair = _templates(spec)
    if (single, pair) == _PLAIN and not _offset_trims(spec):
        return None
    return PostProcessor(single, pair, spec)


def _offset_trims(spec: dict) -> list[bool]:
    kind = spec.get("type")
    if kind == "Sequence":
        return [trim for inner in spec.get("processors", []) for trim in _offset_trims(inner)]
    if kind in ("ByteLevel", "RobertaProcessing") and spec.get("trim_offsets", True):
        return [bool(spec.get("add_prefix_space", True))]
    return []


def _is_space(char: str) -> bool:
    return char == "\u0120" or char.isspace() and char not in "\x1c\x1d\x1e\x1f"  # Ġ, or Unicode White_Space


def _spaces_first(chars) -> int:
    count = 0
    for char in chars:
        if not _is_space(char):
            break
        count += 1
    return count


def _trimmed(token: str, start: int, end: int, keeps_prefix_space: bool) -> tuple[int, int]:
    leading, trailing = _spaces_first(token), _spaces_first(reversed(token))
    if leading == 1 and keeps_prefix_space:
        leading = 0
    if leading:
        start = min(start + leading, end)
    if trailing and end >= trailing:
        end = max(end - trailing, start)
    return start, end


def _templates(spec: dict) -> tuple[Template, Template]:
    kind = spec.get("type")
    if kind == "ByteLevel":
        return _PLAIN
    if kind == "BertProcessing":
        sep, cls = (int(spec["sep"][1]),), (int(spec["cls"][1]),)
        return [(cls, 0), ("A", 0), (sep, 0)], [(cls, 0), ("A", 0), (sep, 0), ("B", 1), (sep, 1)]
    if kind == "RobertaProcessing":
        sep, cls = (int(spec["sep"][1]),), (int(spec["cls"][1]),)
        return [(cls, 0), ("A", 0), (sep, 0)], [(cls, 0), ("A", 0), (sep, 0), (sep, 0), ("B", 0), (sep, 0)]
    if kind == "TemplateProcessing":
        return _template(spec["single"], spec), _template(spec["pair"], spec)
    if kind == "Sequence":
        adding = [_templates(inner) for inner in spec.get("processors", [])]
        adding = [templates for templates in adding if templates != _PLAIN]
        if len(adding) > 1:
            raise UnsupportedComponentError("post-processor Sequence with more than one processor that adds ids")
        return adding[0] if adding else _PLAIN
    raise UnsupportedComponentError(f"post-processor {kind!r} is not supported")


def _template(pieces: list[dict], spec: dict) -> Template:
    template: Template = []
    for piece in pieces:
        if "Sequence" in piece:
            template.append((piece["Sequence"]["id"], int(piece["Sequence"]["type_id"])))
        else:
            token = piece["SpecialToken"]
            template.append((tuple(int(i) for i in spec["special_tokens"][token["id"]]["ids"]), int(token["type_id"])))
    return template

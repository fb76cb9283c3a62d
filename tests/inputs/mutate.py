"""Structural mutations of real files: a second generator for the fuzz suite, built apart from fuzz.py's.

fuzz.py's own mutations load a document into Python values and dump it back, so they never produce what only
the YAML syntax can say: a key given twice, an anchor reused a thousand times, a tag on a node, a mapping as a
key. This one works on the YAML node graph of the real file (`yaml.compose`: nodes keep their tags, styles and
shared identity) and writes it back with `yaml.serialize` (which turns a node used twice into an anchor and
aliases), or as JSON text for a JSON seed. Each case applies one to three of:

- a mapping key deleted, or given twice (the second value hostile: the YAML spec forbids it, PyYAML keeps the
  last one silently);
- a node's type swapped (a scalar for a mapping, a sequence for a scalar, ...), or a mapping used as a key;
- a node wrapped 65 (one past the gate's limit) to 400 levels deep;
- a scalar made a huge or special number (4,300+ digits, 1e999, .nan, 0x..., 1_000, -0, sexagesimal 1:30:00);
- an alias bomb: a node nested in itself `width` times per level, `levels` deep (the serializer writes each
  level once and the aliases expand it width ** levels times), or a node made to contain itself;
- a scalar given a tag it cannot hold (!!binary, !!timestamp, !!set, !!python/object/apply) or unicode that
  looks like something else (RTL override, zero-width joiners, full-width digits, combining marks, a lone
  surrogate escape);
and then, now and then, bytes: NUL bytes in, a byte flipped, or the text cut at a random offset.

Deterministic: everything is drawn from the `random.Random` given.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable

import yaml

STR, INT, FLOAT, NULL, BOOL = (f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "null", "bool"))
SEQ, MAP = "tag:yaml.org,2002:seq", "tag:yaml.org,2002:map"
UNICODE = ["\u202egpu-east", "a\u200db", "\uff18", "e\u0301\u0301\u0301", "\ud800", "\U0001f600" * 40, "\u2028",
           "\ufeffname", "\u0000x", "\u00a0", "I\u0307", "\u0661\u0662"]
NUMBERS = ["9" * 4301, "-" + "9" * 5000, "1e999", "-1e999", ".nan", ".inf", "0x" + "f" * 40, "0o777777777777",
           "1_000_000", "-0", "1:30:00", "0b" + "1" * 100, "2e-400", "18446744073709551616", "+12", "012"]
TAGS = ["tag:yaml.org,2002:binary", "tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:set",
        "tag:yaml.org,2002:python/object/apply:os.system", "tag:yaml.org,2002:omap", "!custom", INT, FLOAT, BOOL]
MAX_JSON = 256 << 10  # a JSON bomb cannot share nodes: written out in full, cut here


def _nodes(root: yaml.Node) -> list[tuple[yaml.Node | None, yaml.Node]]:
    """Every (parent, node) of the graph, each node once (aliases are shared nodes)."""
    seen: set[int] = set()
    found: list[tuple[yaml.Node | None, yaml.Node]] = []
    stack: list[tuple[yaml.Node | None, yaml.Node]] = [(None, root)]
    while stack:
        parent, node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        found.append((parent, node))
        if isinstance(node, yaml.SequenceNode):
            stack.extend((node, child) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            stack.extend((node, part) for pair in node.value for part in pair)
    return found


def _scalar(value: str, tag: str = STR) -> yaml.ScalarNode:
    return yaml.ScalarNode(tag, value)


def _hostile(rng: random.Random) -> yaml.Node:
    pick = rng.random()
    if pick < 0.3:
        return _scalar(rng.choice(NUMBERS), rng.choice([INT, FLOAT]))
    if pick < 0.5:
        return _scalar(rng.choice(UNICODE))
    if pick < 0.6:
        return _scalar("", NULL)
    if pick < 0.75:
        return yaml.SequenceNode(SEQ, [_scalar("x")])
    if pick < 0.9:
        return yaml.MappingNode(MAP, [(_scalar("k"), _scalar("v"))])
    return _scalar("x" * rng.choice([300, 70_000]))


def _replace(parent: yaml.Node | None, old: yaml.Node, new: yaml.Node) -> bool:
    """`old` replaced by `new` wherever `parent` holds it; False for the root."""
    if isinstance(parent, yaml.SequenceNode):
        parent.value = [new if child is old else child for child in parent.value]
    elif isinstance(parent, yaml.MappingNode):
        parent.value = [(new if k is old else k, new if v is old else v) for k, v in parent.value]
    else:
        return False
    return True


def _mappings(nodes: list[tuple[yaml.Node | None, yaml.Node]]) -> list[yaml.MappingNode]:
    return [n for _, n in nodes if isinstance(n, yaml.MappingNode) and n.value]


def _delete_key(rng: random.Random, root: yaml.Node) -> yaml.Node:
    if mappings := _mappings(_nodes(root)):
        mapping = rng.choice(mappings)
        del mapping.value[rng.randrange(len(mapping.value))]
    return root


def _duplicate_key(rng: random.Random, root: yaml.Node) -> yaml.Node:
    if mappings := _mappings(_nodes(root)):
        mapping = rng.choice(mappings)
        key, _value = rng.choice(mapping.value)
        mapping.value.insert(rng.randrange(len(mapping.value) + 1), (_scalar(key.value) if isinstance(
            key, yaml.ScalarNode) else key, _hostile(rng)))
    return root


def _swap_type(rng: random.Random, root: yaml.Node) -> yaml.Node:
    parent, node = rng.choice(_nodes(root))
    if isinstance(node, yaml.ScalarNode):
        new: yaml.Node = rng.choice([yaml.SequenceNode(SEQ, [node]), yaml.MappingNode(MAP, [(node, node)]),
                                     yaml.MappingNode(MAP, [])])
    elif isinstance(node, yaml.SequenceNode):
        new = rng.choice([_scalar(" ".join(
            c.value for c in node.value if isinstance(c, yaml.ScalarNode))[:200]),
                          yaml.MappingNode(MAP, [(_scalar(str(i)), c) for i, c in enumerate(node.value)])])
    elif isinstance(node, yaml.MappingNode):
        new = rng.choice([_scalar("mapping"), yaml.SequenceNode(SEQ, [v for _, v in node.value]),
                          yaml.MappingNode(MAP, [(yaml.MappingNode(MAP, list(node.value)), _scalar("x"))])])
    else:
        return root
    return root if _replace(parent, node, new) else new


def _nest(rng: random.Random, root: yaml.Node) -> yaml.Node:
    parent, node = rng.choice(_nodes(root))
    new = node
    for _ in range(rng.choice([65, 200, 400])):
        new = yaml.SequenceNode(SEQ, [new]) if rng.random() < 0.5 else yaml.MappingNode(MAP, [(_scalar("a"), new)])
    return root if _replace(parent, node, new) else new


def _number(rng: random.Random, root: yaml.Node) -> yaml.Node:
    scalars = [n for _, n in _nodes(root) if isinstance(n, yaml.ScalarNode)]
    if scalars:
        scalar = rng.choice(scalars)
        # An implicit tag (resolved from the text), as a number typed in the file would be.
        scalar.value = rng.choice(NUMBERS)
        scalar.tag = INT if scalar.value[-1:].isdigit() else FLOAT
        scalar.style = None  # plain, as a number typed in the file
    return root


def _bomb(rng: random.Random, root: yaml.Node) -> yaml.Node:
    parent, node = rng.choice(_nodes(root))
    if rng.random() < 0.2 and isinstance(node, yaml.SequenceNode | yaml.MappingNode):
        if isinstance(node, yaml.SequenceNode):
            node.value.append(node)  # contains itself
        else:
            node.value.append((_scalar("self"), node))
        return root
    level: yaml.Node = _scalar("lol")
    for _ in range(rng.randint(6, 12)):
        level = yaml.SequenceNode(SEQ, [level] * rng.randint(5, 12))
    return root if _replace(parent, node, level) else level


def _tag_or_unicode(rng: random.Random, root: yaml.Node) -> yaml.Node:
    scalars = [n for _, n in _nodes(root) if isinstance(n, yaml.ScalarNode)]
    if scalars:
        scalar = rng.choice(scalars)
        if rng.random() < 0.5:
            scalar.tag = rng.choice(TAGS)
        else:
            scalar.value = rng.choice([rng.choice(UNICODE), scalar.value + rng.choice(UNICODE)])
            scalar.tag = STR
    return root


MUTATIONS: tuple[Callable[[random.Random, yaml.Node], yaml.Node], ...] = (
    _delete_key, _duplicate_key, _swap_type, _nest, _number, _bomb, _tag_or_unicode)


def to_json(node: yaml.Node) -> str:
    """The node graph as JSON text, duplicate keys and all (json.dumps cannot write those); shared nodes are
    written out each time, cut at MAX_JSON."""
    out: list[str] = []
    size = 0
    stack: list[yaml.Node | str] = [node]
    while stack and size < MAX_JSON:
        item = stack.pop()
        if isinstance(item, str):
            text = item
        elif isinstance(item, yaml.ScalarNode):
            plain = item.tag in (INT, FLOAT, BOOL, NULL) and item.style is None
            text = (item.value or "null") if plain else json.dumps(item.value)
        elif isinstance(item, yaml.SequenceNode):
            parts: list[yaml.Node | str] = ["["]
            for i, child in enumerate(item.value):
                parts += [",", child] if i else [child]
            stack.extend(reversed([*parts, "]"]))
            continue
        elif isinstance(item, yaml.MappingNode):
            parts = ["{"]
            for i, (key, value) in enumerate(item.value):
                key_text: yaml.Node | str = json.dumps(key.value) if isinstance(key, yaml.ScalarNode) else key
                parts += [*([","] if i else []), key_text, ":", value]
            stack.extend(reversed([*parts, "}"]))
            continue
        else:
            continue
        out.append(text)
        size += len(text)
    return "".join(out)


def _bytes(rng: random.Random, data: bytes) -> bytes:
    if not data:
        return data
    pick = rng.random()
    at = rng.randrange(len(data))
    if pick < 0.4:
        return data[:at]  # truncated, as a killed write or a full disk leaves it
    if pick < 0.7:
        return data[:at] + bytes([data[at] ^ (1 << rng.randrange(8))]) + data[at + 1:]
    return data[:at] + b"\x00" * rng.randint(1, 16) + data[at:]


def structural(rng: random.Random, text: str, *, as_json: bool = False) -> bytes | None:
    """One structural mutation of a real file's text (see the module doc), or None when the text is not one
    YAML (or JSON) document."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None
    if root is None:
        return None
    for _ in range(rng.randint(1, 3)):
        root = rng.choice(MUTATIONS)(rng, root)
    try:
        out = to_json(root) if as_json else yaml.serialize(root, Dumper=yaml.SafeDumper, allow_unicode=True)
    except (yaml.YAMLError, RecursionError, ValueError):  # e.g. a deep nest the serializer cannot recurse into
        return None
    data = out.encode("utf-8", "surrogatepass")
    return _bytes(rng, data) if rng.random() < 0.25 else data

"""What every declared document shares: strict parsing, one-line errors, serialisation and its JSON Schema.

A document kind is one pydantic model (`Declared`): it parses (strictly: no coercion, unknown keys refused like
kubectl's strict mode), serialises (`dump`: key order as declared, absent values left out) and writes its JSON
Schema (`schema`). pydantic's `ValidationError` never leaves here: `read` turns its first error into the one
line every input error is (`InputError`: file, field path such as `nodes[3].gpus`, reason), in the wording
`geosched.files.fields` has always used, so a file that was refused before is refused with the same line.

The core's dataclasses (geosched.core.models) stay pydantic-free; each model converts to and from them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Self, TypeVar, get_args

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    model_validator,
)

from geosched.core.errors import InputError
from geosched.files.fields import MAX_INTEGER, MAX_NUMBER, describe, describe_document
from geosched.files.formats import API_VERSION

# The validation context of a document geosched wrote, read back (OutputDocument.read_back): its nulls are kept.
WRITTEN = "written"
_set = object.__setattr__  # past pydantic's frozen __setattr__, for `build`
SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_ID = "https://geosched.dev/schemas/{kind}.schema.json"


class Refused(ValueError):
    """A validator's refusal in the project's own words; `at` names the field below where it was raised (a check
    across fields, raised by the model that holds them: `("zones", 1, "b")`)."""

    def __init__(self, reason: str, *at: str | int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.at = at


class Declared(BaseModel):
    """A mapping of a document: strict, frozen, unknown keys refused. A key given as null is a key not given
    (YAML's `key:` with nothing after it), as it always was."""

    model_config = ConfigDict(
        strict=True,
        extra="forbid",
        frozen=True,
        populate_by_name=True,
        validate_by_alias=True,
        validate_by_name=False,
        serialize_by_alias=True,
    )
    # Required keys whose absence is explained beyond "required" (`runtime`: what to give).
    MISSING: ClassVar[dict[str, str]] = {}

    # Per class, computed once (the check below runs for every node of a 40,000-node fleet): the keys a mapping
    # may hold, and the bound of each number field, by key.
    _known: ClassVar[frozenset[str]] = frozenset()
    _number_bounds: ClassVar[dict[str, float]] = {}
    _absent: ClassVar[dict[str, None]] = {}
    _all_set: ClassVar[set[str]] = set()  # shared by the instances `build` makes: frozen, nothing adds to it
    _private: ClassVar[dict[str, Any]] = {}

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls._known = frozenset(f.alias or name for name, f in cls.model_fields.items())
        cls._absent = dict.fromkeys(cls.model_fields)
        cls._all_set = set(cls.model_fields)
        cls._private = {name: attr.get_default() for name, attr in cls.__private_attributes__.items()}
        cls._number_bounds = {
            f.alias or name: most
            for name, f in cls.model_fields.items()
            if f.annotation in (float, float | None)
            and (most := next((m.le for m in f.metadata if getattr(m, "le", None) is not None), None)) is not None
        }

    @model_validator(mode="before")
    @classmethod
    def _known_keys_only(cls, data: Any, info: ValidationInfo) -> Any:
        if isinstance(data, cls):
            return data
        if not isinstance(data, Mapping):
            # Type and size only: at the top this is the whole file, which may be a secret passed by mistake.
            raise Refused(f"expected a mapping, got {describe_document(data)}")
        if not cls._known.issuperset(data):
            unknown = next(k for k in data if not isinstance(k, str) or k not in cls._known)
            raise Refused(f"unknown field (known: {', '.join(sorted(cls._known))})", str(unknown))
        for key, most in cls._number_bounds.items():
            value = data.get(key)
            # An integer past 1e12 where a number is declared is refused by its size: float() of it may overflow,
            # and pydantic refuses one it cannot hold exactly as "not a float".
            if type(value) is int and abs(value) > MAX_NUMBER:
                raise Refused(f"must be <= {most:g}, got a larger number", key)
        cls._header(data)
        for key, why in cls.MISSING.items():
            if data.get(key) is None:
                raise Refused(why, key)
        if info.context and info.context.get(WRITTEN):
            return data  # a document geosched wrote: null is a value it wrote (unknown), not a key left out
        return {k: v for k, v in data.items() if v is not None} if None in data.values() else data

    @classmethod
    def _header(cls, data: Mapping[Any, Any]) -> None:
        """A document checks its `kind` here, before its fields: a Fleet given as a Job is named as such."""

    @classmethod
    def build(cls, **values: Any) -> Self:
        """An instance of values the core holds, without validation (they are valid) and faster than
        `model_construct` (a network view's 100,000 links are written through this); a field not given is None."""
        obj = object.__new__(cls)
        whole = len(values) == len(cls._absent)  # every field given (the usual case): no defaults to merge
        _set(obj, "__dict__", values if whole else {**cls._absent, **values})
        _set(obj, "__pydantic_fields_set__", cls._all_set if whole else set(values))
        _set(obj, "__pydantic_extra__", None)
        _set(obj, "__pydantic_private__", dict(cls._private) if cls._private else None)
        return obj

    # Input documents leave out what is absent; output documents write null where a value is unknown.
    WRITE_NULLS: ClassVar[bool] = False

    def dump(self) -> dict[str, Any]:
        """The document as JSON-ready data: keys in declaration order, fields holding None left out (or null)."""
        # Python mode: a value is written as the model holds it (an int stays an int where a float is declared, so
        # a document built from the core's values keeps the digest it had before the declarations).
        return self.model_dump(mode="python", by_alias=True, exclude_none=not self.WRITE_NULLS)


    def row(self) -> dict[str, Any]:
        """The mapping as a table row: every field, null included (a column stays where a value is unknown)."""
        return self.model_dump(mode="python", by_alias=True)


class Document(Declared):
    """A whole file: `apiVersion` and `kind` first. `kind`, when given, must be this kind's; `apiVersion` is
    written, and read without a check (files written before it existed have none)."""

    KIND: ClassVar[str]
    DESCRIPTION: ClassVar[str]  # the schema's description: what the document is and which commands read it

    api_version: Annotated[Any, WithJsonSchema({"const": API_VERSION})] = Field(default=None, alias="apiVersion")
    kind: Annotated[Any, WithJsonSchema({"type": "string"})] = None

    @classmethod
    def _header(cls, data: Mapping[Any, Any]) -> None:
        kind = data.get("kind")
        if kind is not None and kind != cls.KIND:
            raise Refused(f"expected {cls.KIND!r}, got {describe(kind)}", "kind")

    @classmethod
    def read(cls, data: Any, source: str, context: Mapping[str, Any] | None = None) -> Self:
        """The document, or the InputError of its first fault."""
        return validate(cls, data, source, "", context)

    def dump(self) -> dict[str, Any]:
        body = super().dump()
        body.pop("apiVersion", None)
        body.pop("kind", None)
        return {"apiVersion": API_VERSION, "kind": self.KIND, **body}

    @classmethod
    def extra_schema(cls) -> dict[str, Any]:
        """Keys of the file that another reader takes before the model sees it (a job's Kubernetes options)."""
        return {}

    @classmethod
    def schema_document(cls) -> dict[str, Any]:
        """The kind's JSON Schema (docs/schemas/<kind>.schema.json), generated from the declaration."""
        return kind_schema(cls, cls.KIND, cls.DESCRIPTION, cls.extra_schema(), written=False)


class SettingsDocument(Document):
    """A settings file of geosched's (a GitOps repository's, the scheduler's, the dispatcher's): `apiVersion`, when
    given, must be geosched's own."""

    @classmethod
    def _header(cls, data: Mapping[Any, Any]) -> None:
        version = data.get("apiVersion")
        if version is not None and version != API_VERSION:
            raise Refused(f"expected {API_VERSION!r}, got {describe(version)}", "apiVersion")
        super()._header(data)


class OutputDocument(Declared):
    """A document geosched prints (`-o json|yaml`, wrapped in apiVersion and kind by geosched.console.output) and
    records: the command builds it from the core's values and prints what `dump` writes, so its schema is the shape of
    what was printed; null where a value is unknown. `read_back` reads one again (a consumer's view, and the tests')."""

    KIND: ClassVar[str]
    DESCRIPTION: ClassVar[str]
    WRITE_NULLS: ClassVar[bool] = True

    @classmethod
    def schema_document(cls) -> dict[str, Any]:
        return kind_schema(cls, cls.KIND, cls.DESCRIPTION, {}, written=True)

    @classmethod
    def read_back(cls, body: Any, source: str) -> Self:
        """A document this kind wrote (its body, without apiVersion and kind), read back strictly: what a
        consumer of `-o json` gets is what the declaration holds (tests/test_decl_outputs.py round-trips each)."""
        return validate(cls, body, source, "", {WRITTEN: True})


class Record(Declared):
    """A record geosched keeps for itself as JSON in its store (a gang's journalled request), not a file: no
    apiVersion or kind. Declared like a document all the same, so what is written and read back is one model, its
    schema is generated (docs/schemas), and a damaged row is one line naming where it is, the field and why."""

    KIND: ClassVar[str]
    DESCRIPTION: ClassVar[str]

    @classmethod
    def read(cls, data: Any, source: str, path: str = "") -> Self:
        return validate(cls, data, source, path)

    @classmethod
    def schema_document(cls) -> dict[str, Any]:
        body = _untitled(cls.model_json_schema(by_alias=True, mode="validation"))
        body.pop("title", None)
        body.pop("description", None)
        return {
            "$schema": SCHEMA_DIALECT,
            "$id": SCHEMA_ID.format(kind=cls.KIND),
            "title": cls.KIND,
            "description": cls.DESCRIPTION,
            **body,
        }


def kind_schema(
    model: type[BaseModel], kind: str, description: str, extra: Mapping[str, Any], *, written: bool
) -> dict[str, Any]:
    """A document kind's JSON Schema: apiVersion and kind (required in what geosched `written` prints), then the
    model's (as users write it, for a kind geosched reads)."""
    body = _untitled(model.model_json_schema(by_alias=True, mode="serialization" if written else "validation"))
    body.pop("title", None)
    body.pop("description", None)
    properties = {"apiVersion": {"const": API_VERSION}, "kind": {"const": kind}}
    properties.update({k: v for k, v in body.pop("properties").items() if k not in properties})
    properties.update(extra)
    required = body.pop("required", [])
    if written:
        required = ["apiVersion", "kind", *required]
    return {
        "$schema": SCHEMA_DIALECT,
        "$id": SCHEMA_ID.format(kind=kind),
        "title": kind,
        "description": description,
        **body,
        "required": required,
        "properties": properties,
    }


def _untitled(schema: Any) -> Any:
    """The schema without the titles pydantic derives from field names ("Rtt P50 Ms"): they say nothing the key
    does not, and a model's title stays (it names its $defs entry)."""
    if isinstance(schema, dict):
        out = {k: _untitled(v) for k, v in schema.items()}
        for prop in out.get("properties", {}).values():
            if isinstance(prop, dict):
                prop.pop("title", None)
        return out
    if isinstance(schema, list):
        return [_untitled(v) for v in schema]
    return schema


M = TypeVar("M", bound=BaseModel)


def validate(model: type[M], data: Any, source: str, path: str = "", context: Mapping[str, Any] | None = None) -> M:
    """`data` read as `model` (a part of a file at `path`: a config's `weights`), or an InputError naming
    `source`, the field path and the reason."""
    try:
        return model.model_validate(data, context=dict(context or {}))
    except ValidationError as exc:
        raise one_line(exc, source, path) from None


# --- pydantic's errors in the project's words ----------------------------------------------------------


def one_line(exc: ValidationError, source: str, root: str = "") -> InputError:
    """The first error of `exc` as the InputError geosched.files.fields would have raised for it."""
    error = exc.errors(include_url=False)[0]
    loc: list[str | int] = [part for part in error["loc"] if isinstance(part, str | int)]
    ctx = error.get("ctx") or {}
    cause = ctx.get("error")
    if isinstance(cause, Refused):
        loc.extend(cause.at)
    path = field_path(root, loc)
    if not path and isinstance(cause, Refused) and cause.reason.startswith("expected a mapping"):
        path = "(document)"
    return InputError(source, path, reason(error["type"], error.get("input"), ctx, error["msg"]))


def field_path(root: str, loc: list[str | int]) -> str:
    """`nodes[3].gpus` from ("nodes", 3, "gpus")."""
    out = root
    for part in loc:
        out = f"{out}[{part}]" if isinstance(part, int) else f"{out}.{part}" if out else part
    return out


def reason(kind: str, value: Any, ctx: Mapping[str, Any], message: str) -> str:
    """pydantic's error type (and the bound in its context) in the words of geosched.files.fields."""
    cause = ctx.get("error")
    if isinstance(cause, Refused):
        return cause.reason
    huge_int = isinstance(value, int) and not isinstance(value, bool)
    if kind == "missing":
        return "required"
    if kind == "int_type":
        return f"expected an integer, got {describe(value)}"
    if kind in ("float_type", "finite_number"):
        if huge_int:  # an integer past what a float holds
            return f"must be <= {MAX_NUMBER:g}, got a larger number"
        return f"expected a finite number, got {describe(value)}"
    if kind in ("string_type", "string_too_short", "string_pattern_mismatch"):
        return f"expected a non-empty string, got {describe(value)}"
    if kind == "list_type":
        return f"expected a list, got {describe(value)}"
    if kind == "bool_type":
        return f"expected true or false, got {describe(value)}"
    for bound, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
        if bound in ctx:
            limit = ctx[bound]
            if isinstance(limit, float):  # a number field: written as %g
                shown = "a larger number" if huge_int and abs(value) > MAX_NUMBER else f"{float(value):g}"
                return f"must be {sign} {limit:g}, got {shown}"
            shown = f"{value}" if not huge_int or abs(value) < 10**30 else "a larger number"
            return f"must be {sign} {limit}, got {shown}"
    return message  # pydantic's own sentence: one line, never the value


# --- field types ------------------------------------------------------------------------------------------


def integer(minimum: int | None = None, maximum: int = MAX_INTEGER, **default: Any) -> Any:
    """An integer field (never a boolean or 1.0) within bounds; `default=` when it may be left out."""
    return Field(ge=minimum, le=maximum, **default)


def number(
    minimum: float | None = -MAX_NUMBER, maximum: float = MAX_NUMBER, *, exclusive_minimum: bool = False, **default: Any
) -> Any:
    """A finite number field (an integer is one too; a boolean is not), at most 1e12 across; `minimum` None: the
    model checks the lower bound itself."""
    low = None if minimum is None else float(minimum)
    return Field(
        gt=low if exclusive_minimum else None,
        ge=None if exclusive_minimum else low,
        le=float(maximum),
        allow_inf_nan=False,
        **default,
    )


# Checked by pydantic-core itself (no Python call per value: a fleet has six of these per node); its errors
# (string_type, string_pattern_mismatch) read as geosched.files.fields' "expected a non-empty string".
Text = Annotated[str, Field(min_length=1, pattern=r"\S")]
"""A non-empty string (not only spaces)."""

Time = Annotated[str, WithJsonSchema({"type": "string", "format": "date-time"})]
"""A time geosched writes: RFC 3339, UTC (geosched.console.output.rfc3339)."""


def _string_list(value: Any) -> Any:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise Refused(f"expected a list of strings, got {describe(value)}")
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item:
            raise Refused(f"expected a string, got {describe(item)}", i)
    return value


Strings = Annotated[
    list[str],
    BeforeValidator(_string_list),
    WithJsonSchema(
        {"anyOf": [{"type": "string", "minLength": 1}, {"type": "array", "items": {"type": "string", "minLength": 1}}]}
    ),
]
"""A list of non-empty strings; one string is a list of one."""


def _list(value: Any) -> Any:
    if not isinstance(value, list):
        raise Refused(f"expected a list, got {describe(value)}")
    return value


IsList = BeforeValidator(_list)
"""On a `list[Model]` field: a list, in the project's words when it is not."""


def one_of(choices: Any) -> BeforeValidator:
    """On a Literal field: one of its values, in the project's words when not."""
    options = get_args(choices)

    def check(value: Any) -> Any:
        if not isinstance(value, str) or value not in options:
            raise Refused(f"expected one of {', '.join(options)}, got {describe(value)}")
        return value

    return BeforeValidator(check)

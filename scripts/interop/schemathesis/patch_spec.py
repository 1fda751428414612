#!/usr/bin/env python3
"""Cuts OpenAI's published OpenAPI document down to the operations afm-serve
serves and applies the patches that point it at a local server and keep
generated requests small. Reads YAML (or JSON), writes JSON.

    patch_spec.py SPEC.yml OUT.json --port PORT --model NAME
        [--max-tokens N] [--max-n N] [--vocab N] [--stream]

The patches (each one is about the test set-up, not about what a request may
say; see docs/schemathesis.md):

  servers        one server, http://127.0.0.1:PORT/v1: the server under
                 test is local and serves the API under /v1.
  paths          only POST /completions, /chat/completions and /responses
                 are kept (the operations afm-serve serves), and components
                 no kept operation reaches are dropped: a 3 MB document
                 loads in a fraction of the time.
  security       removed: afm-serve runs without --api-key, so there is no
                 bearer key to send or to leave out.
  model          an enum of the one served model: any other name names a
                 model this server does not have.
  max_tokens, max_completion_tokens, max_output_tokens
                 at most --max-tokens (Responses' own minimum of 16 kept):
                 the spec has no upper bound and each token costs CPU time.
  n, best_of     at most --max-n: each choice is another generation.
  prompt token ids
                 integers in [0, --vocab): the spec cannot know the model's
                 vocabulary, and an id outside it is invalid for any model.
  logit_bias     keys are decimal token ids in the vocabulary and values
                 integers in [-100, 100], as the spec's own description
                 says (its schema only says "string to integer").
  previous_response_id, conversation, prompt, item_reference (Responses)
                 removed: each names an object stored on the server (a
                 response, a conversation, a prompt template, an item) and
                 a random id names none, on any server.
  input (Responses)
                 required: with those gone it is the only thing a request
                 can ask about (the spec requires none of them, since any
                 one will do).
  max_tokens, max_completion_tokens (chat)
                 at least 1: the spec states no lower bound at all, and
                 OpenAI refuses a count below 1.
  text/event-stream replies
                 each event's `data` is the JSON the spec's schema names
                 (or the closing `[DONE]`), as an OpenAPI 3.2 itemSchema:
                 as written, OpenAPI 3.1 tools read the schema as the
                 schema of the SSE event itself. /completions gets one too
                 (its chunks are completion objects whose finish_reason is
                 null until the last): the spec lists no stream for it.
  seed           within int64 (chat's bounds are 2**63 written as a float,
                 one past the largest int64; completions says int64 only
                 as a format).
  top_logprobs (chat)
                 only with logprobs: true, which the spec's description
                 requires and its schema does not encode.
  Response.usage
                 may be null: the spec's own examples of the
                 response.created and response.in_progress events carry
                 `"usage": null` (a response still running has none).
  --stream       (the stream pass) `stream` is required and true, so
                 every request exercises the event stream.
"""

import argparse
import copy
import json
import sys

import yaml

OPERATIONS = {
    "/completions": "post",
    "/chat/completions": "post",
    "/responses": "post",
}


def refs(node, found):
    """Names of the components that node refers to, directly."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                found.add(value)
            else:
                refs(value, found)
    elif isinstance(node, list):
        for value in node:
            refs(value, found)
    return found


def resolve(spec, ref):
    node = spec
    for part in ref.lstrip("#/").split("/"):
        node = node[part]
    return node


def prune_components(spec):
    """Keeps only the components that the kept paths reach."""
    seen = set()
    todo = list(refs(spec["paths"], set()))
    while todo:
        ref = todo.pop()
        if ref in seen:
            continue
        seen.add(ref)
        todo.extend(refs(resolve(spec, ref), set()) - seen)
    for kind, members in list(spec.get("components", {}).items()):
        if not isinstance(members, dict) or kind == "securitySchemes":
            continue
        for name in list(members):
            if f"#/components/{kind}/{name}" not in seen:
                del members[name]


def object_part(schema):
    """The schema's own object (an allOf member with properties) to edit."""
    if "properties" in schema:
        return schema
    for member in schema.get("allOf", []):
        if "properties" in member:
            return member
    raise SystemExit(f"no object part in {json.dumps(schema)[:200]}")


def nullable_int(minimum, maximum):
    return {"anyOf": [{"type": "integer", "minimum": minimum, "maximum": maximum}, {"type": "null"}]}


def cap(props, name, maximum, minimum=None):
    """Sets the property's maximum, keeping its minimum (or setting one
    where the spec has none) and its null."""
    if name not in props:
        raise SystemExit(f"property {name} not found")
    prop = props[name]
    alternatives = prop.get("anyOf", [prop])
    if minimum is None:
        minimum = 0
        for alt in alternatives:
            if alt.get("type") == "integer":
                minimum = alt.get("minimum", 0)
    props[name] = nullable_int(minimum, max(minimum, maximum))


def token_ids(node, vocab):
    """Bounds every integer array item below node (prompt token ids)."""
    if isinstance(node, dict):
        if node.get("type") == "array" and node.get("items", {}).get("type") == "integer":
            node["items"]["minimum"] = 0
            node["items"]["maximum"] = vocab - 1
        for value in node.values():
            token_ids(value, vocab)
    elif isinstance(node, list):
        for value in node:
            token_ids(value, vocab)


def sse_item(ref):
    """An itemSchema for an SSE stream whose events carry JSON of `ref`."""
    return {
        "type": "object",
        "required": ["data"],
        "if": {"properties": {"data": {"const": "[DONE]"}}},
        "else": {
            "properties": {
                "data": {"contentMediaType": "application/json", "contentSchema": {"$ref": ref}}
            }
        },
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("spec")
    parser.add_argument("out")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--max-n", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=49152)
    parser.add_argument("--stream", action="store_true", help="stream: true in every request")
    args = parser.parse_args()

    with open(args.spec, encoding="utf-8") as f:
        spec = yaml.safe_load(f)
    schemas = spec["components"]["schemas"]

    # servers
    spec["servers"] = [{"url": f"http://127.0.0.1:{args.port}/v1"}]
    # paths
    spec["paths"] = {
        path: {method: spec["paths"][path][method]} for path, method in OPERATIONS.items()
    }
    # security
    spec.pop("security", None)
    for path, method in OPERATIONS.items():
        spec["paths"][path][method].pop("security", None)
    model = {"type": "string", "enum": [args.model]}

    # /completions
    completion = object_part(schemas["CreateCompletionRequest"])["properties"]
    completion["model"] = copy.deepcopy(model)
    cap(completion, "max_tokens", args.max_tokens)
    cap(completion, "n", args.max_n)
    cap(completion, "best_of", args.max_n)
    token_ids(completion["prompt"], args.vocab)

    # /chat/completions
    chat = object_part(schemas["CreateChatCompletionRequest"])["properties"]
    chat["model"] = copy.deepcopy(model)
    cap(chat, "max_tokens", args.max_tokens, minimum=1)
    cap(chat, "max_completion_tokens", args.max_tokens, minimum=1)
    cap(chat, "n", args.max_n)

    # seed, both
    for props in (completion, chat):
        props["seed"] = {"anyOf": [{"type": "integer", "minimum": -(2**63), "maximum": 2**63 - 1}, {"type": "null"}]}
    # top_logprobs needs logprobs: true
    schemas["CreateChatCompletionRequest"]["allOf"].append(
        {
            "if": {"required": ["top_logprobs"], "properties": {"top_logprobs": {"type": "integer"}}},
            "then": {"required": ["logprobs"], "properties": {"logprobs": {"const": True}}},
        }
    )

    # logit_bias, both
    digits = len(str(args.vocab - 1))
    for props in (completion, chat):
        props["logit_bias"] = {
            "anyOf": [
                {
                    "type": "object",
                    "propertyNames": {"pattern": f"^[0-9]{{1,{digits - 1}}}$"},
                    "additionalProperties": {"type": "integer", "minimum": -100, "maximum": 100},
                },
                {"type": "null"},
            ]
        }

    # /responses: ResponseProperties is shared with the Response object the
    # server returns, so the request gets its own copy to patch.
    create = schemas["CreateResponse"]
    shared = "#/components/schemas/ResponseProperties"
    schemas["ResponsePropertiesRequest"] = copy.deepcopy(schemas["ResponseProperties"])
    for member in create["allOf"]:
        if member.get("$ref") == shared:
            member["$ref"] = "#/components/schemas/ResponsePropertiesRequest"
    request_props = schemas["ResponsePropertiesRequest"]["properties"]
    request_props["model"] = copy.deepcopy(model)
    for name in ("previous_response_id", "prompt"):
        del request_props[name]
    responses = object_part(create)["properties"]
    del responses["conversation"]
    cap(responses, "max_output_tokens", args.max_tokens)
    object_part(create).setdefault("required", []).append("input")
    item_ref = "#/components/schemas/ItemReferenceParam"
    input_item = schemas["InputItem"]
    input_item["oneOf"] = [m for m in input_item["oneOf"] if m.get("$ref") != item_ref]
    mapping = input_item.get("discriminator", {}).get("mapping", {})
    for key in [k for k, v in mapping.items() if v == item_ref]:
        del mapping[key]

    usage = object_part(schemas["Response"])["properties"]
    usage["usage"] = {"anyOf": [usage["usage"], {"type": "null"}]}

    # Event streams.
    chunk = copy.deepcopy(schemas["CreateCompletionResponse"])
    choice = chunk["properties"]["choices"]["items"]["properties"]
    choice["finish_reason"] = {"anyOf": [choice["finish_reason"], {"type": "null"}]}
    schemas["CreateCompletionStreamChunk"] = chunk
    ok = spec["paths"]["/completions"]["post"]["responses"]["200"]["content"]
    ok["text/event-stream"] = {"schema": {"$ref": "#/components/schemas/CreateCompletionStreamChunk"}}
    for path in OPERATIONS:
        content = spec["paths"][path]["post"]["responses"]["200"]["content"]
        media = content["text/event-stream"]
        media["itemSchema"] = sse_item(media.pop("schema")["$ref"])

    if args.stream:
        for props, part in (
            (completion, object_part(schemas["CreateCompletionRequest"])),
            (chat, object_part(schemas["CreateChatCompletionRequest"])),
            (responses, object_part(create)),
        ):
            props["stream"] = {"type": "boolean", "const": True}
            if "stream" not in part.setdefault("required", []):
                part["required"].append("stream")

    prune_components(spec)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(spec, f)
    print(
        f"patched spec: {len(spec['paths'])} operations, "
        f"{len(schemas)} schemas -> {args.out}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()

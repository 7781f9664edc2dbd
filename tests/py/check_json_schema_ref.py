"""Structured output under a JSON schema (src/structured/schema.c, json.c) against the jsonschema
package (Python's reference validator) and Python's json module.

usage: check_json_schema_ref.py OKV_JSON_CHECK [SEED]

For each schema of the list (objects with required and optional properties, nested objects,
arrays with minItems / maxItems, string enums and consts, integers and numbers, type lists,
Optional[X] as anyOf [X, null], pydantic's $defs with a recursive $ref, a discriminated union of objects:
the server's form for a tool call that must be one of several functions; strings under a pattern, anchored or
searched, and under minLength / maxLength):
  - soundness: 150 random walks over the bytes the recognizer accepts, each to a complete
    document: every one parses (json) and validates (jsonschema);
  - completeness: 150 instances drawn from the schema in Python (properties in the schema's
    order, optional ones left out at random, random whitespace): every one is complete;
  - refusals: instances broken one way each (a required property left out, a property the schema
    does not name, a wrong type, a float for an integer, an enum value that is not listed, one
    array item too many or too few, a string outside its pattern, one character too many or too few): none is
    complete.
Unsupported keywords are refused when the schema is compiled, naming the keyword."""
import json
import os
import random
import subprocess
import sys
import tempfile
import time

import jsonschema

PERSON = {"type": "object", "properties": {"first": {"type": "string"}, "age": {"type": "integer"},
                                           "pets": {"type": "array", "items": {"$ref": "#/$defs/Person"}, "maxItems": 2}},
          "required": ["first"]}
SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name", "age"],
     "additionalProperties": False},
    {"title": "Order", "type": "object", "properties": {
        "id": {"type": "integer", "description": "the order's number"},
        "status": {"enum": ["new", "paid", "shipped \"fast\"", "caf\u00e9"]},
        "items": {"type": "array", "items": {"type": "object", "properties": {
            "sku": {"type": "string"}, "qty": {"type": "integer"}, "price": {"type": "number"}},
            "required": ["sku", "qty"]}, "minItems": 1, "maxItems": 3},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
        "gift": {"type": "boolean"},
        "kind": {"const": "order"}},
     "required": ["id", "status", "items"]},
    {"$defs": {"Person": PERSON}, "$ref": "#/$defs/Person"},
    {"type": "object", "properties": {"v": {"type": ["integer", "string", "null"]}, "w": {"type": "array"},
                                      "x": {}, "y": {"type": "number"}, "o": {"type": "object"}},
     "required": ["v", "w", "x", "o"]},
    {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 4},
    {"type": "array", "minItems": 1, "maxItems": 3, "items": {"anyOf": [
        {"type": "object", "properties": {"name": {"const": "get_weather"}, "parameters": {
            "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"]}}, "required": ["name", "parameters"]},
        {"type": "object", "properties": {"parameters": {"type": "object", "properties": {"q": {"type": "string"}},
                                                         "required": ["q"]},
                                          "note": {"type": "string"}, "name": {"enum": ["search", "find"]}},
         "required": ["name", "parameters"]},
        {"type": "null"}]}},
    # strings under pattern (anchored or not: JSON schema's pattern searches) and minLength / maxLength
    {"type": "object", "properties": {
        "code": {"type": "string", "pattern": "^[A-Z]{3}-\\d{2}$", "examples": ["ABC-12", "ZZZ-00"]},
        "tag": {"type": "string", "pattern": "[0-9]", "examples": ["7", "my 2 dogs!", "\u00e9\n4"]},
        "name": {"type": "string", "minLength": 2, "maxLength": 5},
        "bio": {"type": "string", "minLength": 1},
        "codes": {"type": "array", "maxItems": 3, "items": {"anyOf": [
            {"type": "string", "pattern": "^[a-c]{2}$", "examples": ["ab", "cc"]}, {"type": "null"}]}}},
     "required": ["code", "tag", "name"]},
]
UNSUPPORTED = [({"type": "string", "pattern": "(?<=a)b"}, "lookbehind"), ({"type": "integer", "minimum": 3}, "minimum"),
               ({"type": "object", "properties": {"a": {"type": "string", "maxLength": 3, "pattern": "a"}}},
                "pattern together with minLength"),
               ({"enum": ["a", "b"], "pattern": "a"}, "pattern / minLength / maxLength are supported"),
               ({"allOf": [{"type": "string"}]}, "allOf"), ({"enum": [1, 2]}, "enum"),
               ({"anyOf": [{"type": "object"}, {"type": "object", "properties": {"a": {}}}]}, "discriminated union"),
               ({"anyOf": [{"type": "object", "properties": {"k": {"const": "a"}}, "required": ["k"]},
                           {"type": "object", "properties": {"k": {"enum": ["b", "a"]}}, "required": ["k"]}]},
                "discriminator"),
               ({"anyOf": [{"type": "string"}, {"type": "string", "enum": ["x"]}]}, "same JSON type")]


def discriminator(alts):
    """the property that tells object alternatives apart, as the server picks it: the first of the first
    alternative that all of them require with const / enum values"""
    objs = [a for a in alts if a.get("type") == "object"]
    if len(objs) < 2:
        return None
    for k in objs[0].get("properties", {}):
        if all(k in o.get("required", []) and ("const" in o["properties"][k] or "enum" in o["properties"][k])
               for o in objs):
            return k
    return None


def ws(rng):
    return rng.choice(["", "", "", " ", "\n  "])


def dump_str(s):
    return json.dumps(s, ensure_ascii=False)


def draw(rng, sch, root, depth=0, first=None):
    """an instance of sch written as text, properties in schema order (a union's discriminator first)"""
    if "$ref" in sch:
        return draw(rng, root["$defs"][sch["$ref"].split("/")[-1]], root, depth + 1)
    if "enum" in sch:
        return dump_str(rng.choice(sch["enum"]))
    if "const" in sch:
        return dump_str(sch["const"])
    if "anyOf" in sch:
        return draw(rng, rng.choice(sch["anyOf"]), root, depth, discriminator(sch["anyOf"]))
    t = sch.get("type")
    if isinstance(t, list):
        t = rng.choice(t)
    if t is None:
        t = rng.choice(["string", "integer", "boolean", "null"] + (["object", "array"] if depth < 3 else []))
    if t == "object" and "properties" not in sch:   # an open object: any names
        return "{" + ",".join(ws(rng) + dump_str(rng.choice(["k", "zz", "a b"]) + str(i)) + ":" +
                              draw(rng, {"type": rng.choice(["string", "integer", "null"])}, root, depth + 1)
                              for i in range(rng.randint(0, 3))) + "}"
    if t == "object":
        props = sch.get("properties", {})
        if first in props:
            props = dict([(first, props[first])] + [(k, v) for k, v in props.items() if k != first])
        req = set(sch.get("required", []))
        parts = []
        for k, v in props.items():
            if k in req or rng.random() < 0.5:
                parts.append(ws(rng) + dump_str(k) + ws(rng) + ":" + ws(rng) + draw(rng, v, root, depth + 1) + ws(rng))
        return "{" + ",".join(parts) + ws(rng) + "}"
    if t == "array":
        lo, hi = sch.get("minItems", 0), min(sch.get("maxItems", 3), 3 if depth < 3 else 0)
        n = rng.randint(lo, max(lo, hi))
        items = sch.get("items", {"type": "integer"})
        return "[" + ",".join(ws(rng) + draw(rng, items, root, depth + 1) for _ in range(n)) + ws(rng) + "]"
    if t == "string" and "examples" in sch:   # a pattern's: strings the schema gives
        return dump_str(rng.choice(sch["examples"]))
    if t == "string":
        lo, hi = sch.get("minLength", 0), sch.get("maxLength", max(5, sch.get("minLength", 0) + 3))
        return dump_str("".join(rng.choice("ab \u00e9\"\\\n") for _ in range(rng.randint(lo, hi))))
    if t == "integer":
        return str(rng.randint(-1000, 1000))
    if t == "number":
        return rng.choice([str(rng.randint(-9, 9)), repr(rng.uniform(-100, 100)), "1e-3", "-2.5E+4"])
    if t == "boolean":
        return rng.choice(["true", "false"])
    return "null"


def run(tool, schema_path, docs):
    out = subprocess.run([tool, "--schema", schema_path], input="".join(d.encode().hex() + "\n" for d in docs),
                         capture_output=True, text=True).stdout.splitlines()
    assert len(out) == len(docs), out[:3]
    return out


def main():
    tool = sys.argv[1]
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else int(time.time()) % 100000
    print(f"seed {seed} (check_json_schema_ref.py TOOL {seed} repeats this run)")
    rng = random.Random(seed)
    fails = 0
    with tempfile.TemporaryDirectory() as td:
        for si, sch in enumerate(SCHEMAS):
            path = os.path.join(td, f"s{si}.json")
            with open(path, "w") as f:
                json.dump(sch, f)
            # soundness: the recognizer's own random walks
            walks = subprocess.run([tool, "--schema", path, "--walk", "150", str(seed + si)], capture_output=True,
                                   text=True).stdout.splitlines()
            bad = 0
            n_long = sum(w == "long" for w in walks)
            if n_long > 15:
                bad += 1
                print(f"FAIL schema {si}: {n_long} of {len(walks)} walks did not finish within 4,000 bytes")
            for w in walks:
                if w == "long":
                    continue
                if w == "stuck":
                    bad += 1
                    print(f"FAIL schema {si}: a walk found no byte to go on with")
                    continue
                doc = bytes.fromhex(w).decode("utf-8")
                try:
                    jsonschema.validate(json.loads(doc), sch)
                except (ValueError, jsonschema.ValidationError) as e:
                    bad += 1
                    if bad <= 3:
                        print(f"FAIL schema {si}: a walk wrote {doc[:200]!r}: {str(e)[:150]}")
            # completeness: instances drawn in Python
            inst = [draw(rng, sch, sch) for _ in range(150)]
            for d in inst:   # they are valid (the drawing is right)
                jsonschema.validate(json.loads(d), sch)
            verdict = run(tool, path, inst)
            miss = [(d, v) for d, v in zip(inst, verdict) if v != "complete"]
            for d, v in miss[:3]:
                print(f"FAIL schema {si}: a valid instance is {v}: {d[:200]!r}")
            # refusals
            broken = breakages(rng, sch)
            verdict = run(tool, path, [b for b, _ in broken])
            wrong = [(b, why) for (b, why), v in zip(broken, verdict) if v == "complete"]
            for b, why in wrong[:3]:
                print(f"FAIL schema {si}: {why} accepted: {b[:200]!r}")
            fails += bad + len(miss) + len(wrong)
            print(f"schema {si}: {len(walks)} walks valid ({bad} not), {len(inst)} instances complete ({len(miss)} not), "
                  f"{len(broken)} broken ones refused ({len(wrong)} not)")
        for sch, word in UNSUPPORTED:
            path = os.path.join(td, "u.json")
            with open(path, "w") as f:
                json.dump(sch, f)
            r = subprocess.run([tool, "--schema", path], input="", capture_output=True, text=True)
            if r.returncode != 3 or word not in r.stdout:
                fails += 1
                print(f"FAIL: schema {sch} not refused naming {word!r}: {r.stdout.strip()!r}")
        print(f"{len(UNSUPPORTED)} unsupported schemas refused by name")
    if fails:
        print(f"FAIL: {fails}")
        return 1
    print("OK")
    return 0


def breakages(rng, sch):
    out = []
    s = sch
    if "$ref" in s:
        s = sch["$defs"][s["$ref"].split("/")[-1]]
    if s.get("type") == "object":
        props, req = s.get("properties", {}), s.get("required", [])
        full = {}
        for k, v in props.items():
            full[k] = json.loads(draw(rng, v, sch, 2))
        for r in req:
            d = {k: v for k, v in full.items() if k != r}
            out.append((json.dumps(d), f"missing required {r!r}"))
        out.append((json.dumps({**full, "zzz_extra": 1}), "a property the schema does not name"))
        for k, v in props.items():
            t = v.get("type")
            if t == "integer":
                out.append((json.dumps({**full, k: 1.5}), f"a float for integer {k!r}"))
                out.append((json.dumps({**full, k: "1"}), f"a string for integer {k!r}"))
            if t == "string":
                out.append((json.dumps({**full, k: 5}), f"a number for string {k!r}"))
            if "pattern" in v:
                out.append((json.dumps({**full, k: "!!"}), f"a string outside the pattern of {k!r}"))
            if "maxLength" in v:
                out.append((json.dumps({**full, k: "a" * (v["maxLength"] + 1)}), f"too long a string for {k!r}"))
            if v.get("minLength", 0) > 0:
                out.append((json.dumps({**full, k: "a" * (v["minLength"] - 1)}), f"too short a string for {k!r}"))
            if "enum" in v:
                out.append((json.dumps({**full, k: "not-listed"}), f"an unlisted enum value for {k!r}"))
            if "const" in v:
                out.append((json.dumps({**full, k: "other"}), f"another value for const {k!r}"))
            if t == "array" and "maxItems" in v:
                item = json.loads(draw(rng, v.get("items", {"type": "integer"}), sch, 2))
                out.append((json.dumps({**full, k: [item] * (v["maxItems"] + 1)}), f"too many items in {k!r}"))
            if t == "array" and v.get("minItems", 0) > 0:
                out.append((json.dumps({**full, k: []}), f"too few items in {k!r}"))
    if s.get("type") == "array":
        out.append(("[" + ",".join(["1"] * (s.get("maxItems", 3) + 1)) + "]", "too many items"))
        out.append(("[1]" if s.get("minItems", 0) > 1 else "[]", "too few items") if s.get("minItems", 0) > 0 else ("[1.5]", "a float"))
        out.append(('["a", 2]', "a string item"))
        if "anyOf" in s.get("items", {}):   # a discriminated union of objects
            out += [('[{"name": "get_weather", "parameters": {"q": "x"}}]', "another alternative's properties"),
                    ('[{"name": "search", "parameters": {"city": "x"}}]', "another alternative's properties"),
                    ('[{"name": "lookup", "parameters": {}}]', "a discriminator value no alternative has"),
                    ('[{"parameters": {"q": "x"}}]', "no discriminator"),
                    ('[{"name": "find", "parameters": {"q": "x"}, "note": 3}]', "a wrong type in the alternative"),
                    ('[{}]', "an empty object")]
    return out


if __name__ == "__main__":
    sys.exit(main())

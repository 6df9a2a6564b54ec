#!/usr/bin/env python3
"""Writes mask_bench cases that look like production structured-output requests:
API payloads, tool calls, extraction records, a recursive tree, formats, an enum-heavy
schema, a regex and a GBNF grammar, each with instances of realistic length.

usage: realistic_cases.py OUT.jsonl
"""
import json
import random
import sys

rng = random.Random(7)
WORDS = ("the quick brown fox jumps over lazy dog alpha beta gamma delta structured output "
         "engine token mask grammar schema request server latency throughput batch").split()
CJK = "结构化输出引擎语法掩码请求服务器延迟吞吐量"


def text(n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


cases = []
person = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 80},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "email": {"type": "string", "format": "email"},
        "address": {"type": "object", "properties": {
            "street": {"type": "string"}, "city": {"type": "string"},
            "zip": {"type": "string", "pattern": "^[0-9]{5}$"}}, "required": ["city"]},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 10},
        "active": {"type": "boolean"},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
cases.append({"schema": person, "instances": [
    {"name": "Ada Lovelace", "age": 36, "email": "ada@example.com",
     "address": {"street": "12 St James's Square", "city": "London", "zip": "12345"},
     "tags": ["math", "poetry", "engines"], "active": True},
    {"name": "李雷", "age": 29, "tags": [text(3), text(2)], "active": False},
]})

tool = {
    "type": "object",
    "properties": {
        "tool": {"enum": ["search", "calculator", "weather", "calendar", "email"]},
        "arguments": {"type": "object", "properties": {
            "query": {"type": "string"}, "limit": {"type": "integer", "minimum": 1, "maximum": 50},
            "units": {"enum": ["metric", "imperial"]}}},
        "reasoning": {"type": "string", "maxLength": 400},
    },
    "required": ["tool", "arguments"],
}
cases.append({"schema": tool, "instances": [
    {"tool": "search", "arguments": {"query": text(8), "limit": 10}, "reasoning": text(30)},
    {"tool": "weather", "arguments": {"query": "Zürich", "units": "metric"}},
]})

order = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string", "format": "uuid"},
        "created": {"type": "string", "format": "date-time"},
        "items": {"type": "array", "minItems": 1, "items": {"type": "object", "properties": {
            "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
            "qty": {"type": "integer", "minimum": 1},
            "price": {"type": "number", "exclusiveMinimum": 0}}, "required": ["sku", "qty", "price"]}},
        "total": {"type": "number"},
        "status": {"enum": ["pending", "paid", "shipped", "cancelled"]},
    },
    "required": ["order_id", "items", "status"],
}
cases.append({"schema": order, "instances": [
    {"order_id": "2eb8aa08-aa98-11ea-b4aa-73b441d16380", "created": "2024-02-29T12:30:00Z",
     "items": [{"sku": "ABC-%04d" % i, "qty": i + 1, "price": 9.99 + i} for i in range(8)],
     "total": 123.45, "status": "paid"},
]})

tree = {"$defs": {"node": {"type": "object", "properties": {
    "label": {"type": "string"}, "weight": {"type": "number"},
    "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["label"]}},
    "$ref": "#/$defs/node"}


def node(depth):
    n = {"label": text(2), "weight": round(rng.random() * 10, 3)}
    if depth:
        n["children"] = [node(depth - 1) for _ in range(2)]
    return n


cases.append({"schema": tree, "instances": [node(3)]})

extraction = {"type": "object", "properties": {
    "summary": {"type": "string"},
    "entities": {"type": "array", "items": {"type": "object", "properties": {
        "text": {"type": "string"}, "kind": {"enum": ["person", "org", "place", "date", "other"]},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1}}, "required": ["text", "kind"]}},
    "language": {"type": "string", "enum": ["en", "zh", "de", "fr", "ja"]}}}
cases.append({"schema": extraction, "instances": [
    {"summary": text(60), "entities": [{"text": text(2), "kind": "org", "confidence": 0.93}] * 5, "language": "en"},
    {"summary": CJK * 4, "entities": [], "language": "zh"},
]})

countries = ["country_%03d" % i for i in range(300)]
cases.append({"schema": {"type": "array", "items": {"enum": countries}},
              "instances": [[rng.choice(countries) for _ in range(20)]]})
cases.append({"schema": {}, "instances": [{"free": [text(5), 1, 2.5, None, {"x": text(10)}]}]})
cases.append({"regex": "[A-Z][a-z]+( [a-z]+){3,12}\\.", "instances": [
    "The quick brown fox jumps over the lazy dog."]})
cases.append({"ebnf": 'root ::= "SELECT " cols " FROM " name ( " WHERE " name " = " num )? ";"\n'
              'cols ::= name ( ", " name )*\nname ::= [a-z_]+\nnum ::= [0-9]+\n',
              "instances": ["SELECT id, name, email FROM users WHERE id = 42;"]})

with open(sys.argv[1], "w") as out:
    for c in cases:
        out.write(json.dumps(c, ensure_ascii=False) + "\n")

#!/usr/bin/env python3
"""Writes mask_bench cases from the JSON-Schema-Test-Suite (fetched by
scripts/fetch_structured_testdata.sh): one line per schema with its valid instances.

usage: make_suite_cases.py SUITE_TESTS_DIR OUT.jsonl
"""
import json
import pathlib
import sys

root = pathlib.Path(sys.argv[1])
with open(sys.argv[2], "w") as out:
    for path in sorted(root.rglob("*.json")):
        for case in json.load(open(path)):
            valid = [t["data"] for t in case["tests"] if t["valid"]]
            if valid:
                line = {"schema": case["schema"], "instances": valid}
                # Outside optional/format the suite treats format as an annotation.
                if not str(path.relative_to(root)).startswith("optional/format"):
                    line["assert_format"] = False
                out.write(json.dumps(line) + "\n")

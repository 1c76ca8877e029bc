"""Summarises a Chrome trace-event document for trace-json.apir."""
import json
import sys

doc = json.load(sys.stdin)
events = doc["traceEvents"]
assert all(e["ph"] in ("M", "X") for e in events)
print("valid trace-event JSON")
procs = sorted(e["args"]["name"] for e in events if e["name"] == "process_name")
print("processes: " + ", ".join(procs))
threads = [e["args"]["name"] for e in events if e["name"] == "thread_name" and e["pid"] == 0]
print("threads of core 0: " + ", ".join(threads))
spans = {}
for e in events:
    if e["ph"] != "X":
        continue
    k = e["args"]["kernel"]
    lo, hi = spans.get(k, (float("inf"), 0.0))
    spans[k] = (min(lo, e["ts"]), max(hi, e["ts"] + e["dur"]))
print("first kernel on core 0 ends at %.3f us" % spans["first"][1])
print("@second starts at %.3f us" % spans["second"][0])
print("@other starts at %.3f us" % spans["other"][0])
print("stalls: %d" % sum(1 for e in events if e["name"] == "stall"))

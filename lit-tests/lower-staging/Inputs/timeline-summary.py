"""Summarises a timeline SVG for timeline-axis.apir: per panel, in document
order, its kernel and core, where its bars start and end (px, rounded) and
the last tick label of its axis."""
import sys
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"
KINDS = {"load", "flush", "compute", "copy", "stall"}

root = ET.parse(sys.stdin).getroot()
for g in root.iter(NS + "g"):
    if "kernel" not in g.get("class", "").split():
        continue
    xs = []
    for r in g.iter(NS + "rect"):
        if KINDS & set(r.get("class", "").split()):
            x = float(r.get("x"))
            xs.append((x, x + float(r.get("width"))))
    ticks = [t.text for t in g.iter(NS + "text") if t.get("class") == "tick-label"]
    print(
        "@%s core %s: bars %d-%d px, axis to %s us"
        % (
            g.get("data-kernel"),
            g.get("data-core"),
            round(min(x for x, _ in xs)),
            round(max(x for _, x in xs)),
            ticks[-1],
        )
    )
